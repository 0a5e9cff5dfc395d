// Prefill GEMM on tensor cores: out[t][n] = sum_k A[t][k] * B[n][k] (+ bias[n]) for the
// prompt rows of a step, with mma.sync.m16n8k16 (bf16 in, f32 accumulate), which runs
// on sm_90a and sm_120a alike.
//
// Operands are bf16 planes in device memory, [rows][ld] with k contiguous:
//  - A: the activations, split by memra_gemm_split_rows into hi = bf16(x) and
//    lo = bf16(x - hi) (x = hi + lo to ~2^-17 relative); kSplitA = false is the fast
//    mode (hi only, bf16 rounding of x, ~2^-9 relative);
//  - B: the weight rows, bf16 weights as they are, or other schemes dequantized by
//    memra_gemm_dequant_* into hi (and lo when kSplitB) planes.
// Per k16 step every output element gets, in this fixed order, hi*hi, then lo*hi
// (kSplitA), then hi*Blo (kSplitB), each product exact in f32 (8x8-bit significands).
//
// Batch invariance: the CTA tile (128 tokens x 128 features x 32 k), the k loop
// (k-tiles 0..K/32 in order, no split-K) and the mma sequence per element are fixed;
// they depend on K only. A row of A only meets row i of the product (an mma never
// mixes rows), so a token's output is bitwise the same whatever M is, whatever the
// other rows hold and wherever the row sits in the batch. Rows past M and k past K
// are zero-filled by cp.async and never stored.
//
// Without nvcc (tests/cuda/gemm_emulator_test.cpp includes this file on the host) the
// cp.async, ldmatrix and mma primitives and the shared memory come from the emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif
#include <stdint.h>

namespace memra::cuda::gemm {

constexpr int kBM = 128;        // tokens per CTA
constexpr int kBN = 128;        // output features per CTA
constexpr int kBK = 32;         // k per pipeline stage
constexpr int kThreads = 256;   // 8 warps: 2 (tokens, 64 each) x 4 (features, 32 each)
constexpr int kTileBytes = 128 * kBK * 2;  // one 128 x 32 bf16 tile

template <bool kSplitA, bool kSplitB>
struct Config {
  static constexpr int kTiles = 2 + (kSplitA ? 1 : 0) + (kSplitB ? 1 : 0);
  static constexpr int kStages = kSplitB ? 3 : 4;
  static constexpr int kStageBytes = kTiles * kTileBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes;
  static constexpr int kAlo = 1, kBhi = kSplitA ? 2 : 1, kBlo = kBhi + 1;  // tile slots in a stage
};

// Byte offset of 16-byte chunk c (0..3) of row r in a 128 x 32 tile (64-byte rows).
// The xor spreads the 8 rows an ldmatrix phase reads over all 32 banks.
__device__ __forceinline__ uint32_t swizzle(int r, int c) {
  return static_cast<uint32_t>(r * 64 + ((c ^ ((r >> 1) & 3)) << 4));
}

#if defined(__CUDACC__)
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// One 128 x 32 tile of a [rows][ld] bf16 plane into shared memory: 512 16-byte
// chunks, two per thread; chunks past `rows` or `k_valid` are zero-filled.
__device__ __forceinline__ void load_tile(uint32_t dst, const __nv_bfloat16* __restrict__ g, int64_t ld, int row0,
                                          int rows, int k0, int k_valid, int tid) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int idx = tid + i * kThreads;
    const int r = idx >> 2, c = idx & 3;
    const int gr = row0 + r, gk = k0 + c * 8;
    const bool ok = gr < rows && gk < k_valid;
    const __nv_bfloat16* src = ok ? g + static_cast<int64_t>(gr) * ld + gk : g;
    cp_async16(dst + swizzle(r, c), src, ok ? 16 : 0);
  }
}

template <bool kSplitA, bool kSplitB>
__device__ __forceinline__ void gemm_tile(const __nv_bfloat16* __restrict__ a_hi, const __nv_bfloat16* __restrict__ a_lo,
                                          int64_t lda, int32_t m, const __nv_bfloat16* __restrict__ b_hi,
                                          const __nv_bfloat16* __restrict__ b_lo, int64_t ldb, int32_t n, int32_t k,
                                          float* __restrict__ out, int64_t ldo, const int32_t* __restrict__ out_rows,
                                          const float* __restrict__ bias) {
  using C = Config<kSplitA, kSplitB>;
#if defined(__CUDACC__)
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
#else
  const uint32_t base = 0;  // the emulator's shared addresses: offsets into its smem_raw
#endif
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 1, wn = warp >> 1;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int k_tiles = (k + kBK - 1) / kBK;

  auto stage = [&](int s, int slot) { return base + static_cast<uint32_t>(s * C::kStageBytes + slot * kTileBytes); };
  auto load_stage = [&](int s, int kt) {
    const int k0 = kt * kBK;
    load_tile(stage(s, 0), a_hi, lda, m0, m, k0, k, tid);
    if constexpr (kSplitA) load_tile(stage(s, C::kAlo), a_lo, lda, m0, m, k0, k, tid);
    load_tile(stage(s, C::kBhi), b_hi, ldb, n0, n, k0, k, tid);
    if constexpr (kSplitB) load_tile(stage(s, C::kBlo), b_lo, ldb, n0, n, k0, k, tid);
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // tile kt landed for every thread; stage (kt-1) is free again
    const int pf = kt + C::kStages - 1;
    if (pf < k_tiles) load_stage(pf % C::kStages, pf);
    cp_async_commit();

    const int s = kt % C::kStages;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      // B fragments of the warp's 4 feature tiles: one ldmatrix.x4 per pair.
      uint32_t bh[4][2], bl[4][2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int r = wn * 32 + j * 16 + (lane & 7) + ((lane >> 4) << 3);
        const int c = ks * 2 + ((lane >> 3) & 1);
        ldmatrix_x4(stage(s, C::kBhi) + swizzle(r, c), bh[2 * j][0], bh[2 * j][1], bh[2 * j + 1][0], bh[2 * j + 1][1]);
        if constexpr (kSplitB)
          ldmatrix_x4(stage(s, C::kBlo) + swizzle(r, c), bl[2 * j][0], bl[2 * j][1], bl[2 * j + 1][0], bl[2 * j + 1][1]);
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int r = wm * 64 + mi * 16 + (lane & 15);
        const int c = ks * 2 + (lane >> 4);
        uint32_t ah[4], al[4];
        ldmatrix_x4(stage(s, 0) + swizzle(r, c), ah[0], ah[1], ah[2], ah[3]);
        if constexpr (kSplitA) ldmatrix_x4(stage(s, C::kAlo) + swizzle(r, c), al[0], al[1], al[2], al[3]);
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          mma_bf16(acc[mi][ni], ah, bh[ni][0], bh[ni][1]);
          if constexpr (kSplitA) mma_bf16(acc[mi][ni], al, bh[ni][0], bh[ni][1]);
          if constexpr (kSplitB) mma_bf16(acc[mi][ni], ah, bl[ni][0], bl[ni][1]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Accumulator e of tile (mi, ni): token g (+8 for e >= 2), feature 2*t4 + (e & 1).
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int t = m0 + wm * 64 + mi * 16 + g + 8 * half;
      if (t >= m) continue;
      const int64_t dst = out_rows ? out_rows[t] : t;
      float* orow = out + dst * ldo;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = n0 + wn * 32 + ni * 8 + 2 * t4 + e;
          if (col < n) {
            float v = acc[mi][ni][2 * half + e];
            if (bias) v = v + bias[col];
            orow[col] = v;
          }
        }
      }
    }
  }
}

}  // namespace memra::cuda::gemm
