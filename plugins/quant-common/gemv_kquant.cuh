// GEMV for the 4/5-bit k-quants (Q4_K, Q5_K): y[t][r] = sum_c x[t][c] * W[r][c]
// (+ bias[r]), W dequantized on the fly, tiled over tokens like gemv.cuh (same entry
// points and launch shape: 4 warps = 4 rows per block, grid.y walks token tiles).
//
// Super-block (256 elements): f16 d, f16 dmin, 12 bytes of 6-bit scales/mins,
// [Q5_K: 32 bytes qh, bit g of qh[l] is the fifth bit of sub-block g's element l],
// then four 32-byte code pairs; byte l of pair k holds element 64k+l (low nibble,
// sub-block 2k) and element 64k+32+l (high nibble, sub-block 2k+1).
//
// A weight is (d*sc)*q - (dmin*m) for its sub-block g, so a sub-block contributes
//   dg * sum_l q_l*x_l  -  mg * sum_l x_l          (dg = d*sc, mg = dmin*m).
// The kernel computes exactly that: per element one byte permute (the code becomes
// the float 2^23 + q), one subtract and one fmaf — instead of dequantizing every
// weight (about half the instructions; at batch 1 the old kernel was issue bound).
// The x sums of each 32-element sub-block are computed once per block into shared
// memory (fixed sequential order) and shared by the block's 4 rows. This is not the
// CPU oracle's rounding order, so the result matches it within the matmul bound,
// not bitwise; what must be bitwise — the same token's output for any launch — holds.
//
// Loads: one warp owns one row; lane j of each group of 8 takes bytes 16*(j&1)..+15
// of pair j>>1 of a super-block in one 16-byte load (Q5_K: plus the matching 16 qh
// bytes) and the 16-byte header; a chunk of 4096 columns (4 super-blocks per group)
// is in flight at once, issued before the block stages x, so the two latencies overlap.
//
// x: a lane reads 16 consecutive floats and the warp's lanes are 64-256 floats apart,
// so straight from global memory every 16-byte load touched 32 L1 lines: the L1, not
// HBM, bounded the kernel (about 16 us for a 4096 x 4096 matrix). For NT <= 2 (decode)
// the block stages the chunk's x in shared memory padded by 4 floats per 64
// (index e + 4*(e/64)), which makes those reads 4-way, the minimum for 512 bytes.
// Staging moves values, not arithmetic: results are the same bits either way.
//
// Order (fixed, independent of the launch's token count): a lane walks its
// super-blocks ascending; in each, per token: the 16 low-nibble products in order,
// the 16 high-nibble ones, then acc += dg0*p_lo, acc += dg1*p_hi, and (lane h = 0 of
// the pair only) acc -= mg0*sx, acc -= mg1*sx; then the fixed xor butterfly. So a
// token's output is bitwise the same for M = 1..16 and beyond, whatever NT is.
#pragma once

#include "kernels/matmul/gemv.cuh"
#include "plugins/quant-common/block_units.cuh"

namespace memra::cuda {


// Float of a small non-negative integer q (< 2^23), exactly, without I2F.
__device__ __forceinline__ float small_int_float(uint32_t q) {
  return __fsub_rn(__uint_as_float(q | 0x4B000000u), 8388608.0f);
}

// Byte b of `codes` (a value < 256) as an exact float: one permute, one subtract.
template <int B>
__device__ __forceinline__ float code_float(uint32_t codes) {
  return __fsub_rn(__uint_as_float(__byte_perm(codes, 0x4B000000u, 0x7540u | B)), 8388608.0f);
}

// What one lane loads of one super-block.
struct KquantSlice {
  uint4 head;   // d, dmin, scales
  uint4 codes;  // 16 code bytes
  uint4 high;   // Q5_K: the 16 qh bytes of the same elements
};

template <bool kFifthBit>
struct KquantLayout {
  static constexpr int kBytes = kFifthBit ? 176 : 144;
  static constexpr int kCodes = kFifthBit ? 48 : 16;  // offset of the code pairs
};

// One lane's 32 elements of one super-block (16 of sub-block 2k at xs[0..15], 16 of
// sub-block 2k+1 at xs[32..47]) into every token of the tile. sx[t*stride + g] is the
// sum of x over sub-block g (chunk-relative) of token t.
template <bool kFifthBit, int NT>
__device__ __forceinline__ void kquant_slice(const KquantSlice& s, int k, bool adds_mins, const float* __restrict__ xs,
                                             int64_t cols, const float* sx, int sx_stride, int sub0, int nt,
                                             float (&acc)[NT]) {
  const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(s.head.x & 0xffffu)));
  const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(s.head.x >> 16)));
  int sc0, mn0, sc1, mn1;
  scale_min_k4(s.head.y, s.head.z, s.head.w, 2 * k, sc0, mn0);
  scale_min_k4(s.head.y, s.head.z, s.head.w, 2 * k + 1, sc1, mn1);
  const float dg0 = __fmul_rn(d, static_cast<float>(sc0)), mg0 = __fmul_rn(dmin, static_cast<float>(mn0));
  const float dg1 = __fmul_rn(d, static_cast<float>(sc1)), mg1 = __fmul_rn(dmin, static_cast<float>(mn1));
  const uint32_t words[4] = {s.codes.x, s.codes.y, s.codes.z, s.codes.w};
  const uint32_t highs[4] = {s.high.x, s.high.y, s.high.z, s.high.w};
  float lo[16], hi[16];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    uint32_t ql = words[c] & 0x0f0f0f0fu, qh = (words[c] >> 4) & 0x0f0f0f0fu;
    if constexpr (kFifthBit) {
      ql |= ((highs[c] >> (2 * k)) & 0x01010101u) << 4;
      qh |= ((highs[c] >> (2 * k + 1)) & 0x01010101u) << 4;
    }
    lo[4 * c] = code_float<0>(ql);
    lo[4 * c + 1] = code_float<1>(ql);
    lo[4 * c + 2] = code_float<2>(ql);
    lo[4 * c + 3] = code_float<3>(ql);
    hi[4 * c] = code_float<0>(qh);
    hi[4 * c + 1] = code_float<1>(qh);
    hi[4 * c + 2] = code_float<2>(qh);
    hi[4 * c + 3] = code_float<3>(qh);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < nt) {
      const float* xt = xs + t * cols;
      float pl = 0.0f, ph = 0.0f;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float4 xl = *reinterpret_cast<const float4*>(xt + 4 * c);
        pl = fmaf(lo[4 * c], xl.x, pl);
        pl = fmaf(lo[4 * c + 1], xl.y, pl);
        pl = fmaf(lo[4 * c + 2], xl.z, pl);
        pl = fmaf(lo[4 * c + 3], xl.w, pl);
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float4 xh = *reinterpret_cast<const float4*>(xt + 32 + 4 * c);
        ph = fmaf(hi[4 * c], xh.x, ph);
        ph = fmaf(hi[4 * c + 1], xh.y, ph);
        ph = fmaf(hi[4 * c + 2], xh.z, ph);
        ph = fmaf(hi[4 * c + 3], xh.w, ph);
      }
      float a = acc[t];
      a = fmaf(dg0, pl, a);
      a = fmaf(dg1, ph, a);
      if (adds_mins) {
        a = fmaf(-mg0, sx[t * sx_stride + sub0], a);
        a = fmaf(-mg1, sx[t * sx_stride + sub0 + 1], a);
      }
      acc[t] = a;
    }
  }
}

// Shared-memory index of chunk element e (see the x note above).
__device__ __forceinline__ int staged_index(int e) { return e + 4 * (e >> 6); }
constexpr int kStageCols = 4096;                        // columns per chunk (16 super-blocks)
constexpr int kStagePadded = kStageCols + kStageCols / 16;  // floats per staged token

// The chunking of a tile of NT tokens: x of up to 8 tokens is staged (about 35 KB of
// shared memory: 4096 columns for 1-2 tokens, 2048 for 4, 1024 for 8); 16-token tiles
// read x from global memory. kSteps super-blocks per lane group are loaded per chunk.
// Chunking moves values only: a lane still walks its super-blocks in ascending order.
template <int NT>
struct KquantTile {
  static constexpr bool kStage = NT <= 8;
  static constexpr int kCols = NT <= 2 ? 4096 : NT <= 4 ? 2048 : NT <= 8 ? 1024 : 4096;
  static constexpr int kSteps = kCols / 1024;  // 4 groups x 256 columns per step
  static constexpr int kPadded = kCols + kCols / 16;
  static constexpr int kSubs = kCols / 32;
};

template <bool kFifthBit, int NT>
__device__ __forceinline__ void gemv_kquant(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows, int64_t cols,
                                            const float* __restrict__ x, int64_t m, float* __restrict__ y,
                                            const float* __restrict__ bias) {
  using L = KquantLayout<kFifthBit>;
  using Tile = KquantTile<NT>;
  constexpr bool kStage = Tile::kStage;
  __shared__ float sx[NT * Tile::kSubs];
  __shared__ __align__(16) float xs[kStage ? NT * Tile::kPadded : 4];
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (t0 >= m) return;  // uniform over the block
  const bool active = row < rows;  // inactive warps still take part in the block's barriers
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int group = lane >> 3, k = (lane >> 1) & 3, h = lane & 1;
  const uint8_t* wr = w + (active ? row : 0) * row_bytes;
  const float* xt0 = x + t0 * cols;

  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  for (int64_t c0 = 0; c0 < cols; c0 += Tile::kCols) {
    const int ccols = static_cast<int>(cols - c0 < Tile::kCols ? cols - c0 : Tile::kCols);
    const int subs = ccols / 32;
    const int64_t sb_begin = c0 / 256, sb_end = sb_begin + ccols / 256;
    // 1. This chunk's weights: every super-block of the lane, in flight together.
    KquantSlice sl[Tile::kSteps];
#pragma unroll
    for (int s = 0; s < Tile::kSteps; ++s) {
      const int64_t sb = sb_begin + group + 4 * s;
      if (active && sb < sb_end) {
        const uint8_t* p = wr + sb * L::kBytes;
        sl[s].head = __ldg(reinterpret_cast<const uint4*>(p));
        sl[s].codes = __ldg(reinterpret_cast<const uint4*>(p + L::kCodes + 32 * k + 16 * h));
        if constexpr (kFifthBit) sl[s].high = __ldg(reinterpret_cast<const uint4*>(p + 16 + 16 * h));
        else sl[s].high = make_uint4(0, 0, 0, 0);
      }
    }
    // 2. x of the chunk (staged for NT <= 2) and its sub-block sums, in order.
    if constexpr (kStage) {
      const int vecs = ccols / 4;
      for (int i = threadIdx.x; i < nt * vecs; i += blockDim.x) {
        const int t = i / vecs, e = 4 * (i - t * vecs);
        *reinterpret_cast<float4*>(xs + t * Tile::kPadded + staged_index(e)) =
            *reinterpret_cast<const float4*>(xt0 + t * cols + c0 + e);
      }
      __syncthreads();
    }
    for (int i = threadIdx.x; i < nt * subs; i += blockDim.x) {
      const int t = i / subs, g = i - t * subs;
      const float4* xp = kStage ? reinterpret_cast<const float4*>(xs + t * Tile::kPadded + staged_index(32 * g))
                                : reinterpret_cast<const float4*>(xt0 + t * cols + c0 + 32 * g);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 v = xp[j];
        sum = __fadd_rn(sum, v.x);
        sum = __fadd_rn(sum, v.y);
        sum = __fadd_rn(sum, v.z);
        sum = __fadd_rn(sum, v.w);
      }
      sx[t * Tile::kSubs + g] = sum;
    }
    __syncthreads();
    // 3. The products, super-blocks ascending.
    if (active) {
#pragma unroll
      for (int s = 0; s < Tile::kSteps; ++s) {
        const int64_t sb = sb_begin + group + 4 * s;
        if (sb < sb_end) {
          const int rel = static_cast<int>(256 * (sb - sb_begin)) + 64 * k + 16 * h;
          const float* xl = kStage ? xs + staged_index(rel) : xt0 + c0 + rel;
          kquant_slice<kFifthBit, NT>(sl[s], k, h == 0, xl, kStage ? Tile::kPadded : cols, sx, Tile::kSubs,
                                      static_cast<int>(8 * (sb - sb_begin)) + 2 * k, nt, acc);
        }
      }
    }
    __syncthreads();  // xs and sx are rewritten by the next chunk
  }
  if (!active) return;
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

// Defines memra_gemv_<name>_t{1,2,4,8,16} for Q4_K (false) or Q5_K (true).
#define MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, NT)                                                            \
  extern "C" __global__ void __launch_bounds__(32 * memra::cuda::kGemvWarps)                                   \
      memra_gemv_##name##_t##NT(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x, \
                                int64_t m, float* y, const float* bias) {                                      \
    memra::cuda::gemv_kquant<FIFTH, NT>(w, row_bytes, rows, cols, x, m, y, bias);                               \
  }
#define MEMRA_DEFINE_GEMV_KQUANT(name, FIFTH)     \
  MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, 1)     \
  MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, 2)     \
  MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, 4)     \
  MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, 8)     \
  MEMRA_DEFINE_GEMV_KQUANT_NT(name, FIFTH, 16)
