// y[t][r] = sum_c bf16(x[t][c]) * W[r][c] (+ bias[r]) for bf16 weights W [rows][cols]
// (cols % 8 == 0), on the tensor cores: the decode GEMV of bf16 weights for every row
// count, so a batch of up to 16 tokens streams the weights once (numeric contract v2:
// bf16 activations, products exact in f32, f32 accumulation; ref::bf16_activation_matmul).
//
// A block owns 16 weight rows and 8 tokens per n-tile (NT n-tiles, grid.y walks the
// rest); its kWarps warps split the row's 32-element chunks into kWarps contiguous ranges that
// depend on cols only. Per chunk, lane (g, q) = (lane / 4, lane % 4) loads 16 bytes of
// rows g and g + 8 at elements 8q..8q+7 and the same 8 elements of token g's x
// (rounded to bf16), and two mma.m16n8k16 take elements {0-3} and {4-7} of every lane's
// run: an mma's k order is a permutation of the chunk's, the same one for W and x, so
// the product is the chunk's dot product. The warps' partial sums meet in shared
// memory and are added in warp order, then the bias. A lane loads kUnroll chunks into
// registers, then runs their mmas (a cp.async ring in shared memory measured slower on
// the H200 at M = 1, 8 and 16: docs/PERFORMANCE.md, session 10).
//
// Batch invariance: a token's column goes through the same mma sequence whatever the
// other columns hold (an mma's output element depends on its row of A and column of B
// only) and whatever NT or the token count is, so its bits are the same for any M.
//
// Without nvcc (tests/cuda/gemv_mma_emulator.hpp includes this file on the host) the CUDA
// types, the loads and the mma come from the emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif
#include <stdint.h>

#include "kernels/common/bf16_pack.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/matmul/gemv_mats.hpp"
#include "kernels/matmul/gemv_mma_layout.hpp"
#include "kernels/matmul/gemv_segment.cuh"

namespace memra::cuda::gemv_mma {

using memra::gemv_mma::kRows;
using memra::gemv_mma::kTokens;

#if defined(__CUDACC__)
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
#endif

// The block's epilogue, both tensor-core GEMVs': each warp's accumulators (rows g, g + 8;
// tokens 2q, 2q + 1 of each n-tile) into partial [warps][NT][kRows][kTokens], then per
// (row, token) the warps' sums in warp order, the bias, the store. kFixedWarps > 0: the warp
// count at compile time (the sum unrolled); 0: `warps`.
template <int NT, int kFixedWarps>
__device__ __forceinline__ void store_sums(float* partial, const float (&acc)[NT][4], int warps, int64_t rows, int64_t m,
                                           float* __restrict__ y, const float* __restrict__ bias, int64_t r0, int64_t t0) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  auto at = [&](int wp, int n, int r, int tok) -> float& { return partial[((wp * NT + n) * kRows + r) * kTokens + tok]; };
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    at(warp, n, g, 2 * q) = acc[n][0];
    at(warp, n, g, 2 * q + 1) = acc[n][1];
    at(warp, n, g + 8, 2 * q) = acc[n][2];
    at(warp, n, g + 8, 2 * q + 1) = acc[n][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < NT * kRows * kTokens; i += blockDim.x) {
    const int r = i % kRows, tok = (i / kRows) % kTokens, n = i / (kRows * kTokens);
    const int64_t row = r0 + r, t = t0 + n * kTokens + tok;
    if (row >= rows || t >= m) continue;
    float v = at(0, n, r, tok);
    if constexpr (kFixedWarps > 0) {
#pragma unroll
      for (int j = 1; j < kFixedWarps; ++j) v = v + at(j, n, r, tok);
    } else {
      for (int k = 1; k < warps; ++k) v = v + at(k, n, r, tok);
    }
    if (bias) v = v + bias[row];
    y[t * rows + row] = v;
  }
}

// kUnroll chunks loaded into registers, then used; shared memory only for the warps'
// partial sums.
template <int NT, int kUnroll = memra::gemv_mma::kUnroll, int kWarps = memra::gemv_mma::kWarps>
__device__ __forceinline__ void gemv_tile(const __nv_bfloat16* __restrict__ w, int64_t rows, int64_t cols,
                                                    const float* __restrict__ x, int64_t m, float* __restrict__ y,
                                                    const float* __restrict__ bias, int64_t r0) {
  __shared__ float partial[kWarps * NT * kRows * kTokens];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens * NT;
  const int64_t chunks = (cols + 31) / 32;
  const int64_t c_begin = chunks * warp / kWarps, c_end = chunks * (warp + 1) / kWarps;
  const bool row_a = r0 + g < rows, row_b = r0 + g + 8 < rows;
  const uint4* wa = reinterpret_cast<const uint4*>(w + (row_a ? r0 + g : 0) * cols);
  const uint4* wb = reinterpret_cast<const uint4*>(w + (row_b ? r0 + g + 8 : 0) * cols);
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  uint4 va[kUnroll], vb[kUnroll];
  auto load = [&](int64_t c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = (c + u) * 32 + 8 * q;
      const bool in = c + u < c_end && k < cols;
      va[u] = in && row_a ? __ldcs(wa + k / 8) : make_uint4(0, 0, 0, 0);
      vb[u] = in && row_b ? __ldcs(wb + k / 8) : make_uint4(0, 0, 0, 0);
    }
  };
  // The first round's weights (never written) are loaded before waiting: under PDL they
  // are in flight while the kernels before this one finish (kernels/common/pdl.cuh).
  load(c_begin);
  pdl_wait();
  pdl_launch_dependents();
  for (int64_t c = c_begin; c < c_end; c += kUnroll) {
    if (c != c_begin) load(c);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (c + u >= c_end) break;
      const int64_t k = (c + u) * 32 + 8 * q;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int64_t t = t0 + n * kTokens + g;
        uint32_t bx[4] = {0, 0, 0, 0};
        if (t < m && k < cols) {
          const float4 lo = *reinterpret_cast<const float4*>(x + t * cols + k);
          const float4 hi = *reinterpret_cast<const float4*>(x + t * cols + k + 4);
          bx[0] = pack_bf16(lo.x, lo.y);
          bx[1] = pack_bf16(lo.z, lo.w);
          bx[2] = pack_bf16(hi.x, hi.y);
          bx[3] = pack_bf16(hi.z, hi.w);
        }
        mma(acc[n], va[u].x, vb[u].x, va[u].y, vb[u].y, bx[0], bx[1]);
        mma(acc[n], va[u].z, vb[u].z, va[u].w, vb[u].w, bx[2], bx[3]);
      }
    }
  }
  store_sums<NT, kWarps>(partial, acc, kWarps, rows, m, y, bias, r0, t0);
}

// Block x of a launch over GemvMats (16-row tiles): its matrix and first row.
using Segment = GemvSegment;
__device__ __forceinline__ Segment segment(const memra::ref::GemvMats& ms, int64_t tile) { return gemv_segment<kRows>(ms, tile); }

}  // namespace memra::cuda::gemv_mma

// memra_gemv_bf16_mma_n{1,2}: up to 3 matrices over the same x (GemvMats, 16-row tiles),
// NT n-tiles of 8 tokens per block, 32 * kWarps threads, no dynamic shared memory, grid
// (group_end[2], ceil(m / (8 NT))); the host picks NT by the token count.
#define MEMRA_DEFINE_GEMV_BF16_MMA(NT)                                                                              \
  extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kWarps)                                        \
      memra_gemv_bf16_mma_n##NT(const memra::ref::GemvMats ms, int64_t cols, const float* x, int64_t m) {          \
    const memra::cuda::gemv_mma::Segment s = memra::cuda::gemv_mma::segment(ms, blockIdx.x);                       \
    memra::cuda::gemv_mma::gemv_tile<NT>(reinterpret_cast<const __nv_bfloat16*>(s.w), s.rows, cols, x, m, s.y, s.bias, s.row0); \
  }
// Other unroll/warp shapes, for memra-kernel-check --bench-bf16.
#define MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(U, W)                                                          \
  extern "C" __global__ void __launch_bounds__(32 * W)                                                              \
      memra_bench_gemv_bf16_u##U##w##W##_n1(const __nv_bfloat16* w, int64_t rows, int64_t cols, const float* x, \
                                                 int64_t m, float* y, const float* bias) {                          \
    memra::cuda::gemv_mma::gemv_tile<1, U, W>(w, rows, cols, x, m, y, bias, static_cast<int64_t>(blockIdx.x) * 16); \
  }
