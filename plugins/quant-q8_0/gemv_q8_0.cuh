// GEMV for Q8_0 weights (34-byte blocks: f16 d, 32 int8 codes; w = d*q), tiled over
// tokens like gemv.cuh (same entry points and launch shape).
//
// Why not gemv.cuh's generic unit: 34-byte blocks are only 2-byte aligned, so each
// lane read its block in 17 two-byte loads and converted every code with I2F (a
// quarter-rate instruction); the Q8_0 GEMV ran at 15 % of HBM speed. Here, when the
// row starts 16-byte aligned (row_bytes % 16 == 0, i.e. cols % 256 == 0), a warp
// stages 32 blocks (1088 bytes) of its row at a time through shared memory with
// 16-byte coalesced loads, 4096 columns in flight per warp, and lane j takes block
// j of the run with aligned 4-byte shared loads and a funnel shift. For NT <= 2 the
// block stages x in shared memory as gemv_kquant.cuh does (the lane-per-block x
// reads touched 32 L1 lines per load straight from global memory). A code becomes
// an exact float with one byte permute and one subtract: (2^23 + (q ^ 0x80)) is
// 2^23 + q + 128 exactly.
//
// A block contributes d * sum_l q_l*x_l (one fmaf per element, then one fmaf by d):
// not the CPU oracle's per-weight rounding (q*d then fmaf), so it matches it within
// the matmul bound, not bitwise. Order (fixed, independent of the launch's token
// count): a lane walks its blocks ascending, per token the 32 products in order then
// acc += d*p; then the fixed xor butterfly. Rows whose start is not 16-byte aligned
// use gemv.cuh's generic path; the choice depends on cols only, never on M.
#pragma once

#include "plugins/quant-common/gemv_kquant.cuh"  // staged_index, kStageCols, kStagePadded

namespace memra::cuda {

constexpr int kQ8Chunks = 4;          // 32-block chunks loaded before any is used, per warp
constexpr int kQ8ChunkBytes = 32 * 34;  // 1088 = 68 x 16 bytes
constexpr int kQ8ChunkVecs = kQ8ChunkBytes / 16;

template <int B>
__device__ __forceinline__ float q8_code_float(uint32_t biased) {
  return __fsub_rn(__uint_as_float(__byte_perm(biased, 0x4B000000u, 0x7540u | B)), 8388736.0f);  // 2^23 + 128
}

template <int NT>
__device__ __forceinline__ void gemv_q8_0_aligned(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows,
                                                  int64_t cols, const float* __restrict__ x, int64_t m,
                                                  float* __restrict__ y, const float* __restrict__ bias) {
  constexpr bool kStage = NT <= 2;
  static_assert(kQ8Chunks * 32 * 32 == kStageCols, "one load batch covers one staged chunk");
  __shared__ __align__(16) uint8_t stage[kGemvWarps][kQ8ChunkBytes];
  __shared__ __align__(16) float xs[kStage ? NT * kStagePadded : 4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (t0 >= m) return;  // uniform over the block
  const bool active = row < rows;  // inactive warps still take part in the block's barriers
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const uint4* wr = reinterpret_cast<const uint4*>(w + (active ? row : 0) * row_bytes);
  const float* xt0 = x + t0 * cols;
  uint8_t* my = stage[warp];

  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  for (int64_t c0 = 0; c0 < cols; c0 += kStageCols) {
    const int ccols = static_cast<int>(cols - c0 < kStageCols ? cols - c0 : kStageCols);
    const int cblocks = ccols / 32;  // a multiple of 8 (cols % 256 == 0)
    const int64_t first_vec = (c0 / 32) * 34 / 16;
    // 1. The chunk's weights: up to 4 runs of 32 blocks (1088 bytes each) per warp.
    uint4 v[kQ8Chunks][3];
#pragma unroll
    for (int c = 0; c < kQ8Chunks; ++c) {
      const int blocks_here = min(32, max(0, cblocks - 32 * c));
      const int vecs = blocks_here * 34 / 16;
#pragma unroll
      for (int i = 0; i < 3; ++i) {
        const int idx = lane + 32 * i;
        if (active && idx < vecs) v[c][i] = __ldg(wr + first_vec + c * kQ8ChunkVecs + idx);
      }
    }
    // 2. x of the chunk, staged for NT <= 2 (see gemv_kquant.cuh).
    if constexpr (kStage) {
      const int vecs = ccols / 4;
      for (int i = threadIdx.x; i < nt * vecs; i += blockDim.x) {
        const int t = i / vecs, e = 4 * (i - t * vecs);
        *reinterpret_cast<float4*>(xs + t * kStagePadded + staged_index(e)) =
            *reinterpret_cast<const float4*>(xt0 + t * cols + c0 + e);
      }
      __syncthreads();
    }
    // 3. Each run: through shared memory, then lane j takes block j of it.
    if (active) {
#pragma unroll
      for (int c = 0; c < kQ8Chunks; ++c) {
        const int blocks_here = min(32, max(0, cblocks - 32 * c));
        if (blocks_here == 0) break;
        const int vecs = blocks_here * 34 / 16;
        __syncwarp();  // the previous run's reads are done
#pragma unroll
        for (int i = 0; i < 3; ++i) {
          const int idx = lane + 32 * i;
          if (idx < vecs) reinterpret_cast<uint4*>(my)[idx] = v[c][i];
        }
        __syncwarp();
        if (lane < blocks_here) {
          // Block `lane`: d at byte 34*lane, codes at 34*lane + 2 (4-byte aligned for odd lanes).
          const int start = 34 * lane + 2;
          const int base = start & ~3;
          const uint32_t* sw = reinterpret_cast<const uint32_t*>(my + base);
          uint32_t words[9];
#pragma unroll
          for (int i = 0; i < 9; ++i) words[i] = (i < 8 || base != start) ? sw[i] : 0u;
          const uint32_t dword = base != start ? words[0] : reinterpret_cast<const uint32_t*>(my + base - 4)[0];
          const uint16_t dbits = static_cast<uint16_t>(base != start ? (dword & 0xffffu) : (dword >> 16));
          const float d = __half2float(__ushort_as_half(dbits));
          float q[32];
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const uint32_t code = (base != start ? __funnelshift_r(words[i], words[i + 1], 16) : words[i]) ^ 0x80808080u;
            q[4 * i] = q8_code_float<0>(code);
            q[4 * i + 1] = q8_code_float<1>(code);
            q[4 * i + 2] = q8_code_float<2>(code);
            q[4 * i + 3] = q8_code_float<3>(code);
          }
          const int e = 32 * (32 * c + lane);  // chunk-relative first element
          const float* xb = kStage ? xs + staged_index(e) : xt0 + c0 + e;
          const int64_t tstride = kStage ? kStagePadded : cols;
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            if (t < nt) {
              const float4* xp = reinterpret_cast<const float4*>(xb + t * tstride);
              float p = 0.0f;
#pragma unroll
              for (int j = 0; j < 8; ++j) {
                const float4 xv = xp[j];
                p = fmaf(q[4 * j], xv.x, p);
                p = fmaf(q[4 * j + 1], xv.y, p);
                p = fmaf(q[4 * j + 2], xv.z, p);
                p = fmaf(q[4 * j + 3], xv.w, p);
              }
              acc[t] = fmaf(d, p, acc[t]);
            }
          }
        }
      }
    }
    __syncthreads();  // xs is rewritten by the next chunk
  }
  if (!active) return;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < nt) {
      float s = warp_sum(acc[t]);
      if (lane == 0) {
        if (bias) s = s + bias[row];
        y[(t0 + t) * rows + row] = s;
      }
    }
  }
}

}  // namespace memra::cuda
