// The entries every scheme's kernel module defines beside its GEMVs, as the CUDA
// backend calls them (memra/quant.h, memra_matmul_kernels):
//  - memra_gemm_dequant_<name>: weight rows into the prefill GEMM's bf16 planes, each
//    element the exact f32 value of the decode path's dequantiser (the scheme's unit, as
//    it is), then rounded to bf16 (hi) and, for the split GEMM, the remainder (lo);
//  - memra_embedding_<name>: out[t] = dequant(table[ids[t]]) * scale, a block per token,
//    bitwise the CPU oracle (the same dequantiser, --fmad=false; scale applied as a
//    separate multiply only when it is not 1, like the CPU backend).
// A scheme S provides kUnit and unit(row, u, w) (dequant_units.cuh; Octets<S> for the
// GEMM's 8-element units). store_planes is also the activation pass of gemm_mma.cu.
// Without nvcc (tests/cuda/gemm_emulator.hpp, lookup_emulator_test.cpp) the CUDA types
// come from the host emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif
#include <stdint.h>

#include "kernels/matmul/dequant_units.cuh"

namespace memra::cuda::entries {

// v = hi + lo: hi = bf16(v) (round to nearest), lo = bf16(v - hi); v - hi is exact.
__device__ __forceinline__ void split_bf16(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(v);
  const float h = __bfloat162float(hi);
  lo = __float2bfloat16_rn(isfinite(h) ? v - h : 0.0f);
}

template <int N>
__device__ __forceinline__ void store_planes(const float* v, __nv_bfloat16* __restrict__ hi, __nv_bfloat16* __restrict__ lo) {
  static_assert(N % 8 == 0, "16-byte stores");
#pragma unroll
  for (int j = 0; j < N; j += 8) {
    __align__(16) __nv_bfloat16 h[8], l[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) split_bf16(v[j + i], h[i], l[i]);
    *reinterpret_cast<uint4*>(hi + j) = *reinterpret_cast<const uint4*>(h);
    if (lo) *reinterpret_cast<uint4*>(lo + j) = *reinterpret_cast<const uint4*>(l);
  }
}

// Thread per unit of S (kUnit consecutive elements of one row); rows x k/kUnit threads.
// The block schemes take Octets<S>: a thread per 8 elements dequantising only those, so a
// warp's stores are 512 contiguous bytes (a thread per 32-element unit wrote 64-byte
// strided pieces and reached about a third of the copy bandwidth on a 27B 4-bit prompt;
// a thread per 8 elements dequantising its whole unit was 25 % slower still: H200,
// session 10).
template <class S>
__device__ __forceinline__ void dequant_planes(const uint8_t* __restrict__ w, int64_t row_bytes, int32_t rows, int64_t k,
                                               int64_t ld, __nv_bfloat16* __restrict__ hi, __nv_bfloat16* __restrict__ lo) {
  const int64_t units = k / S::kUnit;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= units * rows) return;
  const int64_t r = id / units, u = id - r * units;
  float v[S::kUnit];
  S::unit(w + r * row_bytes, u, v);
  const int64_t off = r * ld + u * S::kUnit;
  store_planes<S::kUnit>(v, hi + off, lo ? lo + off : nullptr);
}


template <class S>
__device__ __forceinline__ void embedding_row(const uint8_t* __restrict__ table, int64_t row_bytes, int64_t dim,
                                              const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[t]) * row_bytes;
  float* o = out + t * dim;
  const int64_t units = dim / S::kUnit;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    float w[S::kUnit];
    S::unit(row, u, w);
#pragma unroll
    for (int j = 0; j < S::kUnit; ++j) o[u * S::kUnit + j] = scale != 1.0f ? w[j] * scale : w[j];
  }
}

// moe_ffn's routed GEMV (host/backend/cuda/ops_moe.cpp) over a stacked [E][rows][cols] tensor
// of S, expert e's matrix at w + e * expert_bytes, the step's slots grouped by expert
// (kernels/moe/moe_ffn.cu memra_moe_plan: group g < *n_active is expert active[g] with the slots
// order[start[g] .. start[g + 1])): out[s * out_stride + r] = dequant(row r of s's expert) .
// in[s / in_div]. A warp per (group, row) reads the row once for up to 8 of its slots at a time:
// each slot's sum is lane l's units l, l + 32, .. (each unit's kUnit products in order), then
// the butterfly (xor 16, 8, 4, 2, 1), lane 0 writing; so an output has the same bits whichever
// other slots share its expert, and each distinct expert of the step is read once.
template <class S>
__device__ __forceinline__ void moe_gemv(const uint8_t* __restrict__ w, int64_t expert_bytes, int64_t row_bytes, int64_t cols,
                                         const int32_t* __restrict__ n_active, const int32_t* __restrict__ active,
                                         const int32_t* __restrict__ start, const int32_t* __restrict__ order, int32_t groups,
                                         int64_t rows, const float* __restrict__ in, int32_t in_div, float* __restrict__ out,
                                         int64_t out_stride) {
  constexpr int kSlots = 8;
  const int lane = threadIdx.x & 31;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (id >= static_cast<int64_t>(groups) * rows) return;  // whole warps leave together
  const int32_t g = static_cast<int32_t>(id / rows);
  if (g >= *n_active) return;
  const int64_t r = id - static_cast<int64_t>(g) * rows;
  const uint8_t* row = w + static_cast<int64_t>(active[g]) * expert_bytes + r * row_bytes;
  const int64_t units = cols / S::kUnit;
  for (int32_t b = start[g], end = start[g + 1]; b < end; b += kSlots) {
    const int n = end - b < kSlots ? end - b : kSlots;
    const float* x[kSlots];
    float s[kSlots];
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      x[j] = in + static_cast<int64_t>(order[b + (j < n ? j : 0)] / in_div) * cols;
      s[j] = 0.0f;
    }
    for (int64_t u = lane; u < units; u += 32) {
      float v[S::kUnit];
      S::unit(row, u, v);
#pragma unroll
      for (int j = 0; j < kSlots; ++j)
        if (j < n)
          for (int e = 0; e < S::kUnit; ++e) s[j] = __fadd_rn(s[j], __fmul_rn(v[e], x[j][u * S::kUnit + e]));
    }
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      if (j >= n) break;
      float t = s[j];
      for (int off = 16; off > 0; off >>= 1) t = __fadd_rn(t, __shfl_xor_sync(0xffffffffu, t, off));
      if (lane == 0) out[static_cast<int64_t>(order[b + j]) * out_stride + r] = t;
    }
  }
}

}  // namespace memra::cuda::entries

// memra_gemm_dequant_<name> over units S (a thread per unit of a row; 256 threads).
#define MEMRA_DEFINE_GEMM_DEQUANT(name, S)                                                                           \
  extern "C" __global__ void __launch_bounds__(256)                                                                  \
      memra_gemm_dequant_##name(const uint8_t* w, int64_t row_bytes, int32_t rows, int64_t k, int64_t ld,             \
                                __nv_bfloat16* hi, __nv_bfloat16* lo) {                                              \
    memra::cuda::entries::dequant_planes<S>(w, row_bytes, rows, k, ld, hi, lo);                                      \
  }

// memra_embedding_<name> over units S (256 threads, a block per token), and beside it
// memra_moe_gemv_<name>, moe_ffn's routed GEMV over stacked experts of S (a warp per expert row;
// the CUDA backend finds it by the embedding entry's name and falls back to gathering rows
// through the embedding entry where a module lacks it).
#define MEMRA_DEFINE_EMBEDDING(name, S)                                                                                    \
  extern "C" __global__ void memra_embedding_##name(const uint8_t* table, int64_t row_bytes, int64_t dim,                  \
                                                    const int32_t* ids, float scale, float* out) {                         \
    memra::cuda::entries::embedding_row<S>(table, row_bytes, dim, ids, scale, out);                                        \
  }                                                                                                                        \
  extern "C" __global__ void memra_moe_gemv_##name(const uint8_t* w, int64_t expert_bytes, int64_t row_bytes, int64_t cols,    \
                                                   const int32_t* n_active, const int32_t* active, const int32_t* start,    \
                                                   const int32_t* order, int32_t groups, int64_t rows, const float* in,     \
                                                   int32_t in_div, float* out, int64_t out_stride) {                        \
    memra::cuda::entries::moe_gemv<S>(w, expert_bytes, row_bytes, cols, n_active, active, start, order, groups, rows, in,    \
                                      in_div, out, out_stride);                                                             \
  }
