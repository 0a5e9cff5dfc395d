// GEMV for the 4/5-bit k-quants (Q4_K, Q5_K): y[t][r] = sum_c x[t][c] * W[r][c]
// (+ bias[r]), W dequantized on the fly, tiled over tokens like gemv.cuh (same entry
// points and launch shape).
//
// Super-block (256 elements): f16 d, f16 dmin, 12 bytes of 6-bit scales/mins,
// [Q5_K: 32 bytes qh, bit g of qh[l] is the fifth bit of sub-block g's element l],
// then four 32-byte code pairs; byte l of pair k holds element 64k+l (low nibble,
// sub-block 2k) and element 64k+32+l (high nibble, sub-block 2k+1).
//
// Why not gemv.cuh's per-sub-block units: a unit read 48 bytes (header + a whole
// pair) to use 18, did I2F per element (quarter rate) and extracted bytes one by
// one; the Q4_K GEMV ran at 0.49 TB/s, issue bound. Here one warp owns one row and
// streams 4 whole super-blocks per step: lane j of each group of 8 takes bytes
// 16*(j&1)..+15 of pair j>>1 in one 16-byte load (Q5_K: plus the matching 16 qh
// bytes) and the 16-byte header (same address for the group: one transaction),
// decodes its two sub-blocks' scales once per super-block, and turns codes into
// floats with the exact magic-number add (0x4B000000 | q is the float 2^23 + q).
// Each weight is still (d*sc)*q - (dmin*m), rounded per step like the CPU oracle
// (modules built with --fmad=false; explicit _rn intrinsics).
//
// Order (fixed, independent of the launch's token count): a lane walks its
// super-blocks ascending; in each, its 4 code words in order; in each word the 4
// low-nibble elements then the 4 high-nibble ones, one fmaf chain per token; then
// the fixed xor butterfly. So a token's output is bitwise the same for M = 1..16
// and beyond, whatever accumulator count NT the host picked.
#pragma once

#include "kernels/matmul/gemv.cuh"

namespace memra::cuda {

constexpr int kKquantSteps = 4;  // super-block steps loaded before any is used, per lane

// Float of a small non-negative integer q (< 2^23), exactly, without I2F.
__device__ __forceinline__ float small_int_float(uint32_t q) {
  return __fsub_rn(__uint_as_float(q | 0x4B000000u), 8388608.0f);
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
// sub-block 2k+1 at xs[32..47]) into every token of the tile.
template <bool kFifthBit, int NT>
__device__ __forceinline__ void kquant_slice(const KquantSlice& s, int k, const float* __restrict__ xs, int64_t cols,
                                             int nt, float (&acc)[NT]) {
  const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(s.head.x & 0xffffu)));
  const float dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(s.head.x >> 16)));
  int sc0, mn0, sc1, mn1;
  scale_min_k4(s.head.y, s.head.z, s.head.w, 2 * k, sc0, mn0);
  scale_min_k4(s.head.y, s.head.z, s.head.w, 2 * k + 1, sc1, mn1);
  const float dg0 = __fmul_rn(d, static_cast<float>(sc0)), mg0 = __fmul_rn(dmin, static_cast<float>(mn0));
  const float dg1 = __fmul_rn(d, static_cast<float>(sc1)), mg1 = __fmul_rn(dmin, static_cast<float>(mn1));
  const uint32_t words[4] = {s.codes.x, s.codes.y, s.codes.z, s.codes.w};
  const uint32_t highs[4] = {s.high.x, s.high.y, s.high.z, s.high.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float lo[4], hi[4];
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      uint32_t ql = (words[c] >> (8 * b)) & 0x0fu, qh = (words[c] >> (8 * b + 4)) & 0x0fu;
      if constexpr (kFifthBit) {
        ql |= ((highs[c] >> (8 * b + 2 * k)) & 1u) << 4;
        qh |= ((highs[c] >> (8 * b + 2 * k + 1)) & 1u) << 4;
      }
      lo[b] = __fsub_rn(__fmul_rn(dg0, small_int_float(ql)), mg0);
      hi[b] = __fsub_rn(__fmul_rn(dg1, small_int_float(qh)), mg1);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {
        const float4 xl = *reinterpret_cast<const float4*>(xs + t * cols + 4 * c);
        const float4 xh = *reinterpret_cast<const float4*>(xs + t * cols + 32 + 4 * c);
        float a = acc[t];
        a = fmaf(lo[0], xl.x, a);
        a = fmaf(lo[1], xl.y, a);
        a = fmaf(lo[2], xl.z, a);
        a = fmaf(lo[3], xl.w, a);
        a = fmaf(hi[0], xh.x, a);
        a = fmaf(hi[1], xh.y, a);
        a = fmaf(hi[2], xh.z, a);
        a = fmaf(hi[3], xh.w, a);
        acc[t] = a;
      }
    }
  }
}

template <bool kFifthBit, int NT>
__device__ __forceinline__ void gemv_kquant(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows, int64_t cols,
                                            const float* __restrict__ x, int64_t m, float* __restrict__ y,
                                            const float* __restrict__ bias) {
  using L = KquantLayout<kFifthBit>;
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (row >= rows || t0 >= m) return;
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int group = lane >> 3, k = (lane >> 1) & 3, h = lane & 1;
  const uint8_t* wr = w + row * row_bytes;
  const int64_t nsb = cols / 256;
  const float* xl = x + t0 * cols + 64 * k + 16 * h;

  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;

  for (int64_t sb0 = group; sb0 < nsb; sb0 += 4 * kKquantSteps) {
    KquantSlice sl[kKquantSteps];
#pragma unroll
    for (int s = 0; s < kKquantSteps; ++s) {
      const int64_t sb = sb0 + 4 * s;
      if (sb < nsb) {
        const uint8_t* p = wr + sb * L::kBytes;
        sl[s].head = __ldg(reinterpret_cast<const uint4*>(p));
        sl[s].codes = __ldg(reinterpret_cast<const uint4*>(p + L::kCodes + 32 * k + 16 * h));
        if constexpr (kFifthBit) sl[s].high = __ldg(reinterpret_cast<const uint4*>(p + 16 + 16 * h));
        else sl[s].high = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int s = 0; s < kKquantSteps; ++s) {
      const int64_t sb = sb0 + 4 * s;
      if (sb < nsb) kquant_slice<kFifthBit, NT>(sl[s], k, xl + sb * 256, cols, nt, acc);
    }
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
