// Integer-activation decode GEMV for Q4_K weights on the tensor cores (int8
// mma.sync.m16n8k32): the batched decode rows (serving batches, speculative verify)
// stream the weights once for up to 16 tokens. The arithmetic and the order of every
// f32 operation are gemv_int8_ref.hpp's, so every result is bitwise the reference's
// (and the dp4a kernels', gemv_int8.cuh) for any M and any launch.
//
// Block: 16 weight rows (the mma's M) x NT tokens (one n-tile of 8, two for NT = 16),
// 128 * W threads. Unit u of a row (a Q4_K sub-block) belongs to partial slot u % 128;
// slot group k (slots 32k..32k+31, the reference's warp k) is owned by warps
// k*W..k*W+W-1. In a row of super-blocks sb, slot 32k + 8j + g holds sub-block g of
// super-blocks sb = 16p + 4k + j (phases p = 0, 1, ...: cols > 4096).
//
// Integer dots. One mma is one unit for 16 rows and 8 tokens: the unit's 32 k are
// permuted (the same permutation for weights and activations, so the int32 dot is
// unchanged): lane (g, q) = (lane / 4, lane % 4) loads 8 bytes of code chunk c (32
// bytes: low nibbles = sub-block 2c, high = 2c+1) of rows g and g + 8 at bytes 8q..8q+7,
// and token g's 8 activation codes at the same elements of each sub-block. Its A
// registers are the low nibbles (u8) for sub-block 2c and the high nibbles left in
// place (16x the code) for 2c+1; the mma's int32 accumulator starts at the bits of
// 1.5 * 2^23 (low) or 1.5 * 2^19 (high), so the result read as a float is that
// constant plus isum exactly, and one subtraction gives (float)isum.
//
// f32 order. Each C element (row, token) updates its slot as the reference does,
// phases in ascending order (acc = fmaf(dw * isum, da, acc); acc = fmaf(-(dmin*mn), sa,
// acc)). A slot group's 32 slots are summed by the reference's xor-butterfly tree:
// pairs (l, l ^ 16), then ^8, ^4, ^2, ^1, with l = 8j + g, i.e. first over j (j, j+2),
// then (j, j+1), then g ^ 4, g ^ 2, g ^ 1. With g = 2c + h:
//   Q[c][h] = (s[j0] + s[j2]) + (s[j1] + s[j3])          (sub-block 2c + h)
//   D[h]    = (Q[0][h] + Q[2][h]) + (Q[1][h] + Q[3][h]),  group sum = D[0] + D[1].
// A warp walks its chunks in the order 0, 2, 1, 3 (W = 1: all; W = 2: {0, 2} or {1, 3};
// W = 4: one) and leaves its part of that tree in shared memory; one thread per (row,
// token) finishes the tree and adds the groups ((g0 + g1) + g2) + g3, then the bias.
// f32 addition is commutative, so who adds a pair never changes its bits.
//
// Scales: per step a warp's lanes decode (d * sc, -(dmin * mn)) of its 16 rows x 4
// super-blocks for the step's two sub-blocks into shared memory once (lane = row,
// super-block pair), instead of every lane of a quad decoding the same values.
//
// Steps (tile, chunk step, phase) run in that order; a step's weights and headers are
// loaded one step ahead (8-byte code loads that skip L1; headers through L1, since the
// chunk steps of a tile read them again). PDL as gemv_int8.cuh. Requirements (the
// caller's, nothing is checked): cols % 256 == 0, w 16-byte aligned rows, xq 8-byte
// aligned, xm 8-byte aligned (16-byte alignment is used when present).
// Without nvcc (tests/cuda/gemv_int8_mma_emulator.hpp includes this file on the host) the
// CUDA types, the loads and the mma come from the emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
#include <stdint.h>

#include "kernels/common/pdl.cuh"
#include "kernels/matmul/gemv_mats.hpp"
#include "kernels/matmul/gemv_segment.cuh"

namespace memra::cuda::i8mma {

constexpr int kRows = 16;  // weight rows per tile (the mma's M)
constexpr int kGroups = 4;  // slot groups of 32 (the reference's warps)

#if defined(__CUDACC__)
__device__ __forceinline__ uint2 ld_stream8(const void* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// d = a (16 x 32, u8, row) * b (32 x 8, s8, col) + c (every element c).
__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1, int c) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c));
}
#endif

// Accumulator seeds: the bits of 1.5 * 2^23 (ulp 1) and 1.5 * 2^19 (ulp 1/16, for the
// high nibbles, which the mma sees as 16x the code). |isum| <= 32 * 15 * 127 < 2^16.
constexpr int kSeedLo = 0x4B400000;
constexpr int kSeedHi = 0x49400000;
constexpr float kSeedLoF = 12582912.0f;
constexpr float kSeedHiF = 786432.0f;

// The exact float of byte b of w (b warp-uniform): 2^23 + byte, minus 2^23.
__device__ __forceinline__ float byte_float(uint32_t w, uint32_t b) {
  return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4B000000u, b | 0x7440u)), 8388608.0f);
}

using Mats = memra::ref::GemvMats;

using Segment = GemvSegment;

// W warps per slot group; NT tokens (1, 2, 4, 8: one n-tile; 16: two).
template <int NT, int W>
__device__ __forceinline__ void gemv_q4_k_mma(const Mats& ms, int64_t row_bytes, int64_t cols,
                                              const int8_t* __restrict__ xq, const float2* __restrict__ xm, int64_t m) {
  constexpr int kN = NT > 8 ? 2 : 1;   // n-tiles
  constexpr int kSteps = 4 / W;        // chunk steps per warp
  constexpr int kVals = W == 1 ? 1 : 2;  // tree values per (row, token) a warp leaves
  constexpr int kWarps = kGroups * W;
  __shared__ __align__(16) float4 scales[kWarps][4][kRows];  // (d*sc, d*sc', -(dmin*mn), -(dmin*mn')) per (j, row)
  __shared__ float red[kWarps][kVals][kN][kRows][8];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = warp / W, sub = warp - grp * W;
  const int gq = lane >> 2, q = lane & 3;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int64_t units = cols / 32, supers = cols / 256, groups = ms.group_end[Mats::kMax - 1];
  const int phases = static_cast<int>((supers + 15) / 16);
  if (static_cast<int64_t>(blockIdx.x) >= groups) return;  // uniform
  const bool meta16 = (reinterpret_cast<uintptr_t>(xm) & 15u) == 0;

  // Chunk of step ci of this warp: the order 0, 2, 1, 3 split into W parts.
  auto chunk_of = [&](int ci) {
    const int k = sub * kSteps + ci;
    return k == 0 ? 0 : (k == 1 ? 2 : (k == 2 ? 1 : 3));
  };

  struct Step {
    int64_t tile;
    int ci, p;
  };
  // Per step: codes of rows g, g + 8 for the 4 super-blocks; this lane's two headers
  // (row lane % 16, super-blocks 2 (lane / 16) and + 1).
  uint2 wv[4][2];
  uint4 hv[2];
  auto load = [&](const Step& st) {
    const Segment sg = gemv_segment<kRows>(ms, st.tile);
    const int c = chunk_of(st.ci);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t sb = 16 * static_cast<int64_t>(st.p) + 4 * grp + j;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t row = sg.row0 + gq + 8 * r;
        wv[j][r] = make_uint2(0u, 0u);
        if (sb < supers && row < sg.rows) wv[j][r] = ld_stream8(sg.w + row * row_bytes + sb * 144 + 16 + 32 * c + 8 * q);
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t sb = 16 * static_cast<int64_t>(st.p) + 4 * grp + 2 * (lane >> 4) + i;
      const int64_t row = sg.row0 + (lane & 15);
      hv[i] = make_uint4(0u, 0u, 0u, 0u);
      if (sb < supers && row < sg.rows) hv[i] = __ldg(reinterpret_cast<const uint4*>(sg.w + row * row_bytes + sb * 144));
    }
  };

  float acc[4][2][kN][4];   // slot partials of the current chunk step: [j][h][n-tile][C element]
  float qa[2][kN][4];       // tree values kept between chunk steps
  float ta[2][kN][4];
  float val[kVals][kN][4];  // this warp's part of the group's tree
  auto clear_acc = [&] {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][h][n][e] = 0.0f;
  };
  clear_acc();

  Step cur{blockIdx.x, 0, 0};
  load(cur);  // weights only: in flight while the previous kernel finishes (PDL)
  pdl_wait();
  pdl_launch_dependents();
  bool first_tile = true;
  while (cur.tile < groups) {
    const int c = chunk_of(cur.ci);
    // This step's scales into shared memory (the previous step's reads are done).
    __syncwarp();
    {
      const uint32_t b = 2u * static_cast<uint32_t>(c & 1);  // byte of sub-block 2c in the packed scale words
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint4 h = hv[i];
        uint32_t scw, mnw;
        if (c < 2) {
          scw = h.y & 0x3f3f3f3fu;
          mnw = h.z & 0x3f3f3f3fu;
        } else {
          scw = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
          mnw = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
        }
        const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
        const float dmin = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x >> 16)));
        float4 s;
        s.x = __fmul_rn(d, byte_float(scw, b));
        s.y = __fmul_rn(d, byte_float(scw, b + 1));
        s.z = -__fmul_rn(dmin, byte_float(mnw, b));
        s.w = -__fmul_rn(dmin, byte_float(mnw, b + 1));
        scales[warp][2 * (lane >> 4) + i][lane & 15] = s;
      }
    }
    __syncwarp();
    // A registers: low nibbles (sub-block 2c) and high nibbles in place (2c + 1).
    uint32_t alo[4][2][2], ahi[4][2][2];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        alo[j][r][0] = wv[j][r].x & 0x0f0f0f0fu;
        alo[j][r][1] = wv[j][r].y & 0x0f0f0f0fu;
        ahi[j][r][0] = wv[j][r].x & 0xf0f0f0f0u;
        ahi[j][r][1] = wv[j][r].y & 0xf0f0f0f0u;
      }
    Step nxt = cur;
    if (++nxt.p == phases) {
      nxt.p = 0;
      if (++nxt.ci == kSteps) {
        nxt.ci = 0;
        nxt.tile += gridDim.x;
      }
    }
    if (nxt.tile < groups) load(nxt);  // in flight while this step computes

#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t sb = 16 * static_cast<int64_t>(cur.p) + 4 * grp + j;
      if (sb >= supers) continue;  // uniform: an empty slot keeps +0, as the reference's
      const float4 sr[2] = {scales[warp][j][gq], scales[warp][j][gq + 8]};
      const int64_t u0 = sb * 8 + 2 * c;  // units u0 (low nibbles), u0 + 1 (high)
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        const int64_t tb = t0 + 8 * n + gq;  // the B column (token) this lane loads
        uint2 xlo = make_uint2(0u, 0u), xhi = xlo;
        if (8 * n + gq < nt) {
          const int8_t* xp = xq + tb * cols + u0 * 32 + 8 * q;
          xlo = *reinterpret_cast<const uint2*>(xp);
          xhi = *reinterpret_cast<const uint2*>(xp + 32);
        }
        float4 mt[2];  // {da, sa} of units u0, u0 + 1 for tokens 2q, 2q + 1 of the n-tile
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int tt = 8 * n + 2 * q + e;
          mt[e] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          if (tt < nt) {
            const float2* mp = xm + (t0 + tt) * units + u0;
            if (meta16) {
              mt[e] = *reinterpret_cast<const float4*>(mp);
            } else {
              const float2 a = mp[0], b2 = mp[1];
              mt[e] = make_float4(a.x, a.y, b2.x, b2.y);
            }
          }
        }
        int dlo[4], dhi[4];
        mma_u8s8(dlo, alo[j][0][0], alo[j][1][0], alo[j][0][1], alo[j][1][1], xlo.x, xlo.y, kSeedLo);
        mma_u8s8(dhi, ahi[j][0][0], ahi[j][1][0], ahi[j][0][1], ahi[j][1][1], xhi.x, xhi.y, kSeedHi);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float4 s = sr[e >> 1];
          const float4 a = mt[e & 1];
          const float flo = __fsub_rn(__int_as_float(dlo[e]), kSeedLoF);
          const float fhi = __fsub_rn(__int_as_float(dhi[e]), kSeedHiF);
          float& al = acc[j][0][n][e];
          al = fmaf(__fmul_rn(s.x, flo), a.x, al);
          al = fmaf(s.z, a.y, al);
          float& ah = acc[j][1][n][e];
          ah = fmaf(__fmul_rn(s.y, fhi), a.z, ah);
          ah = fmaf(s.w, a.w, ah);
        }
      }
    }

    if (cur.p == phases - 1) {
      // The chunk step is complete: its slots through the first two tree levels.
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float qv = (acc[0][h][n][e] + acc[2][h][n][e]) + (acc[1][h][n][e] + acc[3][h][n][e]);
            if constexpr (kSteps == 1) {
              val[h][n][e] = qv;
            } else {
              if ((cur.ci & 1) == 0) {
                qa[h][n][e] = qv;
              } else {
                const float tv = qa[h][n][e] + qv;  // (Q[0] + Q[2]) or (Q[1] + Q[3])
                if constexpr (kSteps == 2) {
                  val[h][n][e] = tv;
                } else if (cur.ci == 1) {
                  ta[h][n][e] = tv;
                } else {
                  val[0][n][e] = h == 0 ? ta[0][n][e] + tv : val[0][n][e] + (ta[1][n][e] + tv);  // D[0] + D[1]
                }
              }
            }
          }
      clear_acc();
    }

    if (cur.p == phases - 1 && cur.ci == kSteps - 1) {
      // The tile is complete: the warps' parts meet in shared memory.
      const Segment sg = gemv_segment<kRows>(ms, cur.tile);
      if (!first_tile) __syncthreads();  // the previous tile's reads of red are done
      first_tile = false;
#pragma unroll
      for (int v = 0; v < kVals; ++v)
#pragma unroll
        for (int n = 0; n < kN; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) red[warp][v][n][gq + 8 * (e >> 1)][2 * q + (e & 1)] = val[v][n][e];
      __syncthreads();
      for (int i = threadIdx.x; i < kN * kRows * 8; i += kWarps * 32) {
        const int n = i / (kRows * 8), r = (i / 8) % kRows, tok = i % 8;
        const int tt = 8 * n + tok;
        const int64_t row = sg.row0 + r;
        if (tt >= nt || row >= sg.rows) continue;
        float gs[kGroups];
#pragma unroll
        for (int k = 0; k < kGroups; ++k) {
          const int w0 = k * W;
          if constexpr (W == 1) {
            gs[k] = red[w0][0][n][r][tok];
          } else if constexpr (W == 2) {  // warps hold (Q[0] + Q[2]) and (Q[1] + Q[3]) per h
            gs[k] = (red[w0][0][n][r][tok] + red[w0 + 1][0][n][r][tok]) + (red[w0][1][n][r][tok] + red[w0 + 1][1][n][r][tok]);
          } else {  // warps hold Q[0], Q[2], Q[1], Q[3] per h
            float dh[2];
#pragma unroll
            for (int h = 0; h < 2; ++h)
              dh[h] = (red[w0][h][n][r][tok] + red[w0 + 1][h][n][r][tok]) + (red[w0 + 2][h][n][r][tok] + red[w0 + 3][h][n][r][tok]);
            gs[k] = dh[0] + dh[1];
          }
        }
        float s = ((gs[0] + gs[1]) + gs[2]) + gs[3];
        if (sg.bias) s = s + sg.bias[row];
        sg.y[(t0 + tt) * sg.rows + row] = s;
      }
    }
    cur = nxt;
  }
}

}  // namespace memra::cuda::i8mma
