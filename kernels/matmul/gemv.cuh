// y[t][r] = sum_c x[t][c] * W[r][c] (+ bias[r]) with W dequantized on the fly.
//
// One warp owns one output row r and a tile of up to kTileTokens tokens. Lane l
// walks the row's units l, l+32, l+64, ... in order, dequantizes each unit once and
// accumulates it into every token of the tile with explicit fmaf; the 32 lane sums
// are combined with the fixed xor butterfly and lane 0 writes. So the arithmetic for
// (r, t) depends only on the row length, never on how many tokens the launch has or
// what the other rows hold: a token's output is bitwise the same for M = 1..16 (one
// tile, weights streamed once) and for larger M (grid.y walks more tiles of 16).
// Without nvcc (tests/cuda/gemv_f32_emulator_test.cpp) the CUDA types come from the host emulator.
#pragma once

#include <stdint.h>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif
#include <type_traits>

#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/matmul/dequant_units.cuh"

namespace memra::cuda {

constexpr int kTileTokens = 16;  // tokens per tile (grid.y walks the tiles)
constexpr int kGemvWarps = 4;    // rows per block

// A scheme whose unit says kBf16Activations (bf16 weights) takes its activations
// rounded to bf16 (ref::matmul_activation): each x element is rounded on load, so the
// products are exact in f32 (docs/ARCHITECTURE.md, "Per-scheme numerics").
template <class S, class = void>
struct Bf16Activations : std::false_type {};
template <class S>
struct Bf16Activations<S, std::void_t<decltype(S::kBf16Activations)>> : std::bool_constant<S::kBf16Activations> {};

template <class S>
__device__ __forceinline__ float activation(float v) {
  if constexpr (Bf16Activations<S>::value) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

// Accumulates one dequantized unit into the tile's tokens: acc[t] = fma chain over
// the unit's elements in order. The same sequence for every token, whatever NT is.
template <class S, int NT>
__device__ __forceinline__ void accumulate(const float (&wv)[S::kUnit], const float* __restrict__ xu, int64_t cols,
                                           int nt, float (&acc)[NT]) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < nt) {
      const float* xp = xu + t * cols;
      float a = acc[t];
      if constexpr (S::kUnit % 4 == 0) {
#pragma unroll
        for (int j = 0; j < S::kUnit; j += 4) {
          const float4 xv = *reinterpret_cast<const float4*>(xp + j);
          a = fmaf(wv[j], activation<S>(xv.x), a);
          a = fmaf(wv[j + 1], activation<S>(xv.y), a);
          a = fmaf(wv[j + 2], activation<S>(xv.z), a);
          a = fmaf(wv[j + 3], activation<S>(xv.w), a);
        }
      } else {
#pragma unroll
        for (int j = 0; j < S::kUnit; ++j) a = fmaf(wv[j], activation<S>(xp[j]), a);
      }
      acc[t] = a;
    }
  }
}

// NT: accumulators per lane (1, 2, 4, 8 or 16 >= the tile's tokens). The host picks
// the smallest that fits; a token's arithmetic is the same in every instantiation
// (fmaf chains are never reassociated), so the choice cannot change its bits.
template <class S, int NT>
__device__ __forceinline__ void gemv_tile(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows,
                                          int64_t cols, const float* __restrict__ x, int64_t m,
                                          float* __restrict__ y, const float* __restrict__ bias) {
  // Units in flight per lane. Float units are 16 bytes: 8 of them (128 bytes per lane)
  // for short tiles keep enough bytes in flight to approach HBM speed.
  constexpr int kUnroll = S::kUnit >= 32 ? (NT <= 2 ? 4 : 2) : (NT <= 2 ? 8 : 4);
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (row >= rows || t0 >= m) return;  // whole warps; the block's other warps still wait
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const uint8_t* wr = w + row * row_bytes;
  const float* xt0 = x + t0 * cols;
  const int64_t units = cols / S::kUnit;

  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  // Lane l takes units l, l+32, l+64, ... in ascending order; kUnroll of them are
  // loaded before any is used (memory-level parallelism), then consumed in order.
  // PDL (kernels/common/pdl.cuh): the first weight loads are issued before waiting for
  // the previous kernel; x, y and bias are touched only after.
  int64_t u = lane;
  bool waited = false;
  for (; u + 32 * (kUnroll - 1) < units; u += 32 * kUnroll) {
    float wv[kUnroll][S::kUnit];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) S::unit(wr, u + 32 * k, wv[k]);
    if (!waited) {
      pdl_wait();
      pdl_launch_dependents();
      waited = true;
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) accumulate<S, NT>(wv[k], xt0 + (u + 32 * k) * S::kUnit, cols, nt, acc);
  }
  if (!waited) {
    pdl_wait();
    pdl_launch_dependents();
  }
  for (; u < units; u += 32) {
    float wv[S::kUnit];
    S::unit(wr, u, wv);
    accumulate<S, NT>(wv, xt0 + u * S::kUnit, cols, nt, acc);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < nt) {
      float v = warp_sum(acc[t]);
      if (lane == 0) {
        if (bias) v = v + bias[row];
        y[(t0 + t) * rows + row] = v;
      }
    }
  }
}

}  // namespace memra::cuda

// Defines the extern "C" entry points memra_gemv_<name>_t{1,2,4,8,16} for scheme S.
#define MEMRA_DEFINE_GEMV_NT(name, S, NT)                                                                   \
  extern "C" __global__ void __launch_bounds__(32 * memra::cuda::kGemvWarps)                               \
      memra_gemv_##name##_t##NT(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, \
                                int64_t m, float* y, const float* bias) {                                    \
    memra::cuda::gemv_tile<S, NT>(w, row_bytes, rows, cols, x, m, y, bias);                                  \
  }
#define MEMRA_DEFINE_GEMV(name, S)     \
  MEMRA_DEFINE_GEMV_NT(name, S, 1)     \
  MEMRA_DEFINE_GEMV_NT(name, S, 2)     \
  MEMRA_DEFINE_GEMV_NT(name, S, 4)     \
  MEMRA_DEFINE_GEMV_NT(name, S, 8)     \
  MEMRA_DEFINE_GEMV_NT(name, S, 16)
