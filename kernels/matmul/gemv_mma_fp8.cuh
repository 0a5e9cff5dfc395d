// y[t][r] = sum_g s[r][g] * sum_{c in group g} bf16(x[t][c]) * e4m3(q[r][c]) (+ bias[r])
// for memra fp8 weights (fp8_units.cuh: per row cols/128 f32 scales, then the codes) on
// the tensor cores: bf16 activations, products exact, f32 sums (numeric contract v2;
// the reference is ref::bf16_activation_matmul's exact product of the rounded x).
//
// No conversion unit work per weight: a code's sign, exponent and mantissa bits are
// shifted into a bf16's (e4m3x4_to_bf16_scaled), which is the code's value times 2^-120
// exactly, subnormal codes included. So that the products stay far from f32's subnormal
// range, each token's 128-element group of x is scaled by 2^E (its largest magnitude to
// [2^63, 2^64), E in [-7, 127]: exact, bf16 has f32's exponent range) before the bf16
// rounding, and the group's mma sum is multiplied back by 2^(120 - E) and the row's scale.
// The production kernels read x so prepared (fp8_act_ref.hpp: the bf16 plane in the mma's
// pair order and 2^(120 - E) per group), written once per activation by its producer or
// by memra_prepare_act_fp8_rows instead of once per weight tile by every block.
//
// Geometry as gemv_mma_bf16.cuh: a block owns 16 weight rows and NT n-tiles of 8 tokens;
// its warps (blockDim.x / 32, at most kFp8MaxWarps: gemv_mma_layout.hpp) split the row's
// 128-element groups into contiguous ranges that depend on cols and the warp count only. In a group, lane (g, q) takes elements 64h + 16q .. +15 (h = 0, 1) of rows
// g and g + 8 (one 16-byte load each, or four 4-byte loads when the rows are not 16-byte
// aligned: the same values) and of token g's x; each 4-code word feeds one
// mma.m16n8k16 with its codes (0, 2) and (1, 3) paired, x paired alike. The warps'
// partial sums meet in shared memory in warp order, then the bias.
//
// Batch invariance: a token's column runs the same mma sequence, scales and sums whatever
// the other columns hold and whatever NT or the token count is.
#pragma once

#include "kernels/matmul/fp8_act.cuh"
#include "kernels/matmul/fp8_units.cuh"
#include "kernels/matmul/gemv_mma_bf16.cuh"

namespace memra::cuda::gemv_mma {

// Four codes (little-endian bytes of c) as bf16 pairs of value * 2^-120: even = (c0, c2),
// odd = (c1, c3), the lower-indexed code in the low half. Exact for every non-NaN code.
__device__ __forceinline__ void e4m3x4_to_bf16_scaled(uint32_t c, uint32_t& even, uint32_t& odd) {
  even = ((c << 8) & 0x80008000u) | ((c << 4) & 0x07f007f0u);
  odd = (c & 0x80008000u) | ((c >> 4) & 0x07f007f0u);
}

template <bool kAligned>
__device__ __forceinline__ uint4 load_codes(const uint8_t* p) {
  if constexpr (kAligned) {
    return __ldcs(reinterpret_cast<const uint4*>(p));
  } else {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint4(__ldcs(w), __ldcs(w + 1), __ldcs(w + 2), __ldcs(w + 3));
  }
}

// How x reaches the mma: kXPrepared (production): x is the prepared bf16 plane
// (fp8_act_ref.hpp) and `back` its 2^(120 - E) per (token, group); kXScaled: x is f32 and
// each block computes E, scales and rounds x itself (the path kXPrepared replaced, the
// same values: memra-kernel-check holds the two bitwise equal and --bench-fp8 times both;
// `back` unused).
enum XMode { kXPrepared, kXScaled };

template <int NT, bool kAligned, int kUnroll = 2, int kX = kXPrepared>
__device__ __forceinline__ void gemv_fp8_tile(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                              const void* __restrict__ x, const float* __restrict__ back, int64_t m,
                                              float* __restrict__ y, const float* __restrict__ bias, int64_t r0) {
  constexpr int kMaxWarps = memra::gemv_mma::kFp8MaxWarps;
  __shared__ float partial[kMaxWarps * NT * kRows * kTokens];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = static_cast<int>(blockDim.x >> 5);
  const int g = lane >> 2, q = lane & 3;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens * NT;
  const int64_t groups = cols / kFp8Group, row_bytes = groups * 4 + cols;
  const int64_t g_begin = groups * warp / warps, g_end = groups * (warp + 1) / warps;
  const bool row_a = r0 + g < rows, row_b = r0 + g + 8 < rows;
  const uint8_t* ra = w + (row_a ? r0 + g : 0) * row_bytes;
  const uint8_t* rb = w + (row_b ? r0 + g + 8 : 0) * row_bytes;
  const float* sa = reinterpret_cast<const float*>(ra);
  const float* sb = reinterpret_cast<const float*>(rb);
  const uint8_t* ca = ra + groups * 4 + 16 * q;
  const uint8_t* cb = rb + groups * 4 + 16 * q;
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;
  uint4 va[kUnroll][2], vb[kUnroll][2];
  auto load = [&](int64_t j0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool in = j0 + u < g_end;
        const int64_t off = (j0 + u) * kFp8Group + 64 * h;
        va[u][h] = in && row_a ? load_codes<kAligned>(ca + off) : make_uint4(0, 0, 0, 0);
        vb[u][h] = in && row_b ? load_codes<kAligned>(cb + off) : make_uint4(0, 0, 0, 0);
      }
  };
  // The first round's weights (never written) load before waiting (kernels/common/pdl.cuh).
  load(g_begin);
  pdl_wait();
  pdl_launch_dependents();
  for (int64_t j0 = g_begin; j0 < g_end; j0 += kUnroll) {
    if (j0 != g_begin) load(j0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u;
      if (j >= g_end) break;
      const float s_a = row_a ? __ldg(sa + j) : 0.0f, s_b = row_b ? __ldg(sb + j) : 0.0f;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const int64_t t = t0 + n * kTokens + g;
        // Token g's x operands: xe[h][i] / xo[h][i] = bf16(x * 2^E) of the word's elements
        // (0, 2) / (1, 3), zeros past the last token; back0 / back1: 2^(120 - E) of tokens
        // 2q and 2q + 1 (the columns of this lane's accumulators).
        uint32_t xe[2][4], xo[2][4];
        float back0, back1;
        if constexpr (kX == kXPrepared) {
          // Elements 64h + 16q .. +15 of the plane: two 16-byte loads per half.
          uint4 xw[2][2];
          const uint4* xp = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(x) + t * cols + j * kFp8Group + 16 * q);
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int i = 0; i < 2; ++i) xw[h][i] = t < m ? xp[8 * h + i] : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t* pw = reinterpret_cast<const uint32_t*>(&xw[h][0]);
#pragma unroll
            for (int i = 0; i < 4; ++i) xe[h][i] = pw[2 * i], xo[h][i] = pw[2 * i + 1];
          }
          // Tokens past the last read no scale (their columns are never stored).
          const int64_t tb = t0 + n * kTokens + 2 * q;
          back0 = tb < m ? back[tb * groups + j] : 0.0f;
          back1 = tb + 1 < m ? back[(tb + 1) * groups + j] : 0.0f;
        } else {
          float xv[2][16];
          float amax = 0.0f;
          if (t < m) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float4* xp = reinterpret_cast<const float4*>(static_cast<const float*>(x) + t * cols + j * kFp8Group + 64 * h + 16 * q);
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                const float4 v = xp[i];
                xv[h][4 * i] = v.x, xv[h][4 * i + 1] = v.y, xv[h][4 * i + 2] = v.z, xv[h][4 * i + 3] = v.w;
              }
            }
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int i = 0; i < 16; ++i) amax = fmaxf(amax, fabsf(xv[h][i]));
          } else {
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
              for (int i = 0; i < 16; ++i) xv[h][i] = 0.0f;
          }
          // The group's largest |x| of token g (its four lanes q).
          amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
          amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
          const int e = group_exponent(amax);
          const float up = pow2(e);
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const float* xs = xv[h] + 4 * i;
              xe[h][i] = pack_bf16(xs[0] * up, xs[2] * up);
              xo[h][i] = pack_bf16(xs[1] * up, xs[3] * up);
            }
          const float bk = pow2(120 - e);
          back0 = __shfl_sync(0xffffffffu, bk, 8 * q), back1 = __shfl_sync(0xffffffffu, bk, 8 * q + 4);
        }
        float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t wa[4] = {va[u][h].x, va[u][h].y, va[u][h].z, va[u][h].w};
          const uint32_t wb[4] = {vb[u][h].x, vb[u][h].y, vb[u][h].z, vb[u][h].w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            uint32_t ae, ao, be, bo;
            e4m3x4_to_bf16_scaled(wa[i], ae, ao);
            e4m3x4_to_bf16_scaled(wb[i], be, bo);
            mma(p, ae, be, ao, bo, xe[h][i], xo[h][i]);
          }
        }
        acc[n][0] = fmaf(p[0] * back0, s_a, acc[n][0]);
        acc[n][1] = fmaf(p[1] * back1, s_a, acc[n][1]);
        acc[n][2] = fmaf(p[2] * back0, s_b, acc[n][2]);
        acc[n][3] = fmaf(p[3] * back1, s_b, acc[n][3]);
      }
    }
  }
  store_sums<NT, 0>(partial, acc, warps, rows, m, y, bias, r0, t0);
}

}  // namespace memra::cuda::gemv_mma
