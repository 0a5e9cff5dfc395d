// y[t][r] = sum_c x[t][c] * W[r][c] (+ bias[r]) with W dequantized on the fly.
//
// One warp owns one output row r and a tile of up to kTileTokens tokens. Lane l
// walks the row's units l, l+32, l+64, ... in order, dequantizes each unit once and
// accumulates it into every token of the tile with explicit fmaf; the 32 lane sums
// are combined with the fixed xor butterfly and lane 0 writes. So the arithmetic for
// (r, t) depends only on the row length, never on how many tokens the launch has or
// what the other rows hold: a token's output is bitwise the same for M = 1..16 (one
// tile, weights streamed once) and for larger M (grid.y walks more tiles of 16).
#pragma once

#include <stdint.h>

#include "kernels/common/reduce.cuh"
#include "kernels/matmul/dequant_units.cuh"

namespace memra::cuda {

constexpr int kTileTokens = 16;
constexpr int kGemvWarps = 4;  // rows per block

template <class S>
__device__ __forceinline__ void gemv_tile(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows,
                                          int64_t cols, const float* __restrict__ x, int64_t m,
                                          float* __restrict__ y, const float* __restrict__ bias) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTileTokens;
  if (row >= rows || t0 >= m) return;
  const int nt = static_cast<int>(m - t0 < kTileTokens ? m - t0 : kTileTokens);
  const uint8_t* wr = w + row * row_bytes;
  const float* xt0 = x + t0 * cols;
  const int64_t units = cols / S::kUnit;

  float acc[kTileTokens];
#pragma unroll
  for (int t = 0; t < kTileTokens; ++t) acc[t] = 0.0f;

  for (int64_t u = lane; u < units; u += 32) {
    float wv[S::kUnit];
    S::unit(wr, u, wv);
    const float* xu = xt0 + u * S::kUnit;
#pragma unroll
    for (int t = 0; t < kTileTokens; ++t) {
      if (t < nt) {
        const float* xp = xu + t * cols;
        float a = acc[t];
        if constexpr (S::kUnit % 4 == 0) {
#pragma unroll
          for (int j = 0; j < S::kUnit; j += 4) {
            const float4 xv = *reinterpret_cast<const float4*>(xp + j);
            a = fmaf(wv[j], xv.x, a);
            a = fmaf(wv[j + 1], xv.y, a);
            a = fmaf(wv[j + 2], xv.z, a);
            a = fmaf(wv[j + 3], xv.w, a);
          }
        } else {
#pragma unroll
          for (int j = 0; j < S::kUnit; ++j) a = fmaf(wv[j], xp[j], a);
        }
        acc[t] = a;
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTileTokens; ++t) {
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

// Declares the extern "C" entry point memra_gemv_<name> for scheme type S.
#define MEMRA_DEFINE_GEMV(name, S)                                                                      \
  extern "C" __global__ void __launch_bounds__(32 * memra::cuda::kGemvWarps)                           \
      memra_gemv_##name(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, \
                        int64_t m, float* y, const float* bias) {                                        \
    memra::cuda::gemv_tile<S>(w, row_bytes, rows, cols, x, m, y, bias);                                  \
  }
