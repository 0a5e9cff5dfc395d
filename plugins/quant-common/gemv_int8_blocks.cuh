// The built-in block schemes' integer-activation GEMVs on the frame of
// kernels/matmul/gemv_int8.cuh (launch, persistent steps, reductions, PDL), bitwise their
// CPU reference (gemv_int8_ref.hpp) for any launch:
//  - q8_0 / q4_0: 34- and 18-byte blocks are not 16-byte aligned, so each warp stages its
//    run of 32 blocks (1088 / 576 bytes, 16-byte aligned when cols % 256 == 0) through
//    shared memory with coalesced 16-byte loads; lane j then reads block j with 4-byte
//    shared loads and one funnel shift per word (the same code for odd and even j).
//  - q4_k: the 144-byte super-block is 9 aligned 16-byte vectors: the header (d, dmin,
//    scales) and 8 code vectors. Thread 8s+v loads code vector v (16 bytes: low nibbles
//    = half of sub-block 2(v/2), high nibbles = half of sub-block 2(v/2)+1) and the header
//    (one broadcast load per 8 lanes). Partner lanes v, v^1 swap their integer partial of
//    the other's sub-block (one shuffle; integer, so exact), so lane v owns sub-block v.
//  - q5_k (the same kernel, Q5 = true): the 176-byte super-block is 11 vectors, header,
//    qh (2) and 8 code vectors; a lane also loads the qh vector of its elements and ORs
//    the fifth bit of its sub-blocks into the nibbles.
//  - q6_k / iq4_xs (gemv_int8_sb.cuh): 210- and 136-byte super-blocks, staged per warp.
#pragma once

#include "kernels/matmul/gemv_int8.cuh"

namespace memra::cuda::i8 {

// ---- q8_0 / q4_0: warp-staged runs of 32 blocks ---------------------------------------

template <int BlockBytes>
struct Staged {
  static constexpr int kRunBytes = 32 * BlockBytes;  // 1088 (q8_0) or 576 (q4_0)
  static constexpr int kRunVecs = kRunBytes / 16;    // 68 or 36
  static constexpr int kVecsPerLane = (kRunVecs + 31) / 32;
};

// Lane j's block of a staged run: the f16 scale bits and the code bytes as words.
// Block j starts at byte BB*j (2-byte aligned); base = that rounded down to 4. For even
// j (BB*j % 4 == 0) the scale is the low half of word 0 and the codes start 2 bytes in;
// for odd j the scale is the high half of word 0 and the codes are words 1... exactly.
template <int BlockBytes, int CodeWords>
__device__ __forceinline__ void staged_block(const uint8_t* run, int j, uint16_t& dbits, uint32_t (&codes)[CodeWords]) {
  const int start = BlockBytes * j;
  const int base = start & ~3;
  const bool odd = base != start;
  const uint32_t* sw = reinterpret_cast<const uint32_t*>(run + base);
  uint32_t words[CodeWords + 1];
#pragma unroll
  for (int i = 0; i <= CodeWords; ++i) words[i] = sw[i];
  dbits = static_cast<uint16_t>(odd ? (words[0] >> 16) : (words[0] & 0xffffu));
  const unsigned sh = odd ? 32u : 16u;
#pragma unroll
  for (int i = 0; i < CodeWords; ++i) codes[i] = __funnelshift_rc(words[i], words[i + 1], sh);
}

// Scheme 0 = q8_0 (34-byte blocks, 8 code words), 1 = q4_0 (18-byte blocks, 4 code words).
template <int Scheme, int R, int NT>
__device__ __forceinline__ void gemv_staged(const Mats& ms, int64_t row_bytes, int64_t cols,
                                            const int8_t* __restrict__ xq, const float2* __restrict__ xm, int64_t m) {
  constexpr int BB = Scheme == 0 ? 34 : 18;
  constexpr int CW = Scheme == 0 ? 8 : 4;
  using S = Staged<BB>;
  __shared__ __align__(16) uint8_t stage[kWarps][R][S::kRunBytes];
  __shared__ float red[2][kWarps][R * NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int64_t units = cols / 32, groups = ms.group_end[Mats::kMax - 1];
  const int phases = static_cast<int>((units + kPhaseUnits - 1) / kPhaseUnits);
  if (static_cast<int64_t>(blockIdx.x) >= groups) return;  // uniform

  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  // Blocks of this warp's run in phase p: a multiple of 8 (cols % 256 == 0).
  auto run_blocks = [&](int p) {
    const int64_t left = units - (static_cast<int64_t>(p) * kPhaseUnits + 32 * warp);
    return left <= 0 ? 0 : (left < 32 ? static_cast<int>(left) : 32);
  };
  uint4 v[R][S::kVecsPerLane];
  auto load = [&](const Steps& st) {
    const int64_t b0 = static_cast<int64_t>(st.phase) * kPhaseUnits + 32 * warp;
    const int vecs = run_blocks(st.phase) * BB / 16;
    const Segment sg = gemv_segment<R>(ms, st.group);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = sg.row0 + r;
      const uint8_t* src = sg.w + row * row_bytes + b0 * BB;
#pragma unroll
      for (int i = 0; i < S::kVecsPerLane; ++i) {
        const int idx = lane + 32 * i;
        if (row < sg.rows && idx < vecs) v[r][i] = ld_stream(src + 16 * idx);
      }
    }
  };

  Steps cur{blockIdx.x, 0, phases};
  load(cur);  // weights only: in flight while the previous kernel finishes (PDL)
  pdl_wait();
  pdl_launch_dependents();
  int parity = 0;
  while (cur.group < groups) {
    const int nb = run_blocks(cur.phase);
    const int vecs = nb * BB / 16;
    __syncwarp();  // the previous step's shared reads are done
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < S::kVecsPerLane; ++i) {
        const int idx = lane + 32 * i;
        if (idx < vecs) reinterpret_cast<uint4*>(stage[warp][r])[idx] = v[r][i];
      }
    __syncwarp();
    Steps nxt = cur;
    nxt.next();
    if (nxt.group < groups) load(nxt);  // in flight while this step computes and reduces

    if (lane < nb) {
      const int64_t u = static_cast<int64_t>(cur.phase) * kPhaseUnits + 32 * warp + lane;
      // Eight dp4a-ready words per row, word k paired with activation word k of the block.
      uint32_t k8[R][8];
      float dw[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        uint16_t dbits;
        uint32_t cw[CW];
        staged_block<BB, CW>(stage[warp][r], lane, dbits, cw);
        dw[r] = __half2float(__ushort_as_half(dbits));
        if constexpr (Scheme == 0) {
#pragma unroll
          for (int i = 0; i < 8; ++i) k8[r][i] = cw[i];
        } else {
          // q4_0 byte l: low nibble = element l, high nibble = element l + 16; as signed q - 8.
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            k8[r][i] = __vsub4(cw[i] & 0x0f0f0f0fu, 0x08080808u);
            k8[r][i + 4] = __vsub4((cw[i] >> 4) & 0x0f0f0f0fu, 0x08080808u);
          }
        }
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t < nt) {
          const int4* ap = reinterpret_cast<const int4*>(xq + (t0 + t) * cols + 32 * u);
          const int4 a0 = ap[0], a1 = ap[1];
          const float da = xm[(t0 + t) * units + u].x;
#pragma unroll
          for (int r = 0; r < R; ++r) {
            int isum = dp4a(static_cast<int>(k8[r][0]), a0.x, 0);
            isum = dp4a(static_cast<int>(k8[r][1]), a0.y, isum);
            isum = dp4a(static_cast<int>(k8[r][2]), a0.z, isum);
            isum = dp4a(static_cast<int>(k8[r][3]), a0.w, isum);
            isum = dp4a(static_cast<int>(k8[r][4]), a1.x, isum);
            isum = dp4a(static_cast<int>(k8[r][5]), a1.y, isum);
            isum = dp4a(static_cast<int>(k8[r][6]), a1.z, isum);
            isum = dp4a(static_cast<int>(k8[r][7]), a1.w, isum);
            acc[r][t] = fmaf(static_cast<float>(isum), dw[r] * da, acc[r][t]);
          }
        }
      }
    }
    if (cur.phase == phases - 1) {
      const Segment sg = gemv_segment<R>(ms, cur.group);
      finish<R, NT>(acc, red[parity], sg.row0, sg.rows, t0, nt, sg.y, sg.bias);
      parity ^= 1;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    }
    cur = nxt;
  }
}

// ---- q4_k: direct 16-byte loads of code vectors and headers ---------------------------

// Byte k (0..11) of the 12-byte scales field, from the header vector (bytes 4..15 = h.y..h.w).
__device__ __forceinline__ uint32_t header_byte(uint4 h, int k) {
  const uint32_t word = k < 4 ? h.y : (k < 8 ? h.z : h.w);
  return (word >> (8 * (k & 3))) & 0xffu;
}

// Pair = true: the lanes of a pair each load both code vectors of their pair of
// sub-blocks (the same 32 bytes, one request per pair) and keep their own nibbles, so
// no shuffle is needed per token; Pair = false: one vector per lane and the swap above.
// Q5 = true: Q5_K super-blocks (176 bytes: header, qh[32], qs[128]); the fifth bit of
// sub-block g, element l is bit g of qh[l].
template <int R, int NT, bool Pair = false, bool Q5 = false>
__device__ __forceinline__ void gemv_q4_k(const Mats& ms, int64_t row_bytes, int64_t cols,
                                          const int8_t* __restrict__ xq, const float2* __restrict__ xm, int64_t m) {
  __shared__ float red[2][kWarps][R * NT];
  const int tid = threadIdx.x;
  const int v = tid & 7;  // code vector of the super-block = the sub-block this lane owns
  const int c = v >> 1, half = v & 1;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int64_t units = cols / 32, supers = cols / 256, groups = ms.group_end[Mats::kMax - 1];
  constexpr int kPhaseSupers = kPhaseUnits / 8;  // 16
  const int phases = static_cast<int>((supers + kPhaseSupers - 1) / kPhaseSupers);
  if (static_cast<int64_t>(blockIdx.x) >= groups) return;  // uniform

  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  constexpr int kSbBytes = Q5 ? 176 : 144, kQs = Q5 ? 48 : 16;
  uint4 hv[R], qv[R], qv2[R], hb[R], hb2[R];  // hb, hb2: q5_k's qh vectors (unused for q4_k)
  auto load = [&](const Steps& st) {
    const int64_t sb = static_cast<int64_t>(st.phase) * kPhaseSupers + (tid >> 3);
    const Segment sg = gemv_segment<R>(ms, st.group);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = sg.row0 + r;
      if (sb < supers && row < sg.rows) {
        const uint8_t* src = sg.w + row * row_bytes + sb * kSbBytes;
        hv[r] = ld_stream(src);
        if constexpr (Pair) {
          qv[r] = ld_stream(src + kQs + 32 * c);
          qv2[r] = ld_stream(src + kQs + 16 + 32 * c);
          if constexpr (Q5) {
            hb[r] = ld_stream(src + 16);
            hb2[r] = ld_stream(src + 32);
          }
        } else {
          qv[r] = ld_stream(src + kQs + 16 * v);
          if constexpr (Q5) hb[r] = ld_stream(src + 16 + 16 * half);  // qh of elements 16*half..
        }
      }
    }
  };

  Steps cur{blockIdx.x, 0, phases};
  load(cur);  // weights only: in flight while the previous kernel finishes (PDL)
  pdl_wait();
  pdl_launch_dependents();
  int parity = 0;
  while (cur.group < groups) {
    const int64_t sb = static_cast<int64_t>(cur.phase) * kPhaseSupers + (tid >> 3);
    const bool valid = sb < supers;  // the same for both lanes of a pair
    uint32_t lo[R][4], hi[R][4];
    float dw[R], nmw[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint32_t q[4] = {qv[r].x, qv[r].y, qv[r].z, qv[r].w};
      if constexpr (Pair) {
        // Own sub-block v: nibble `half` of bytes 0..15 (lo) and 16..31 (hi) of the pair.
        const uint32_t q2[4] = {qv2[r].x, qv2[r].y, qv2[r].z, qv2[r].w};
        const unsigned sh = 4u * static_cast<unsigned>(half);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          lo[r][i] = (q[i] >> sh) & 0x0f0f0f0fu;   // elements 4i .. 4i+3
          hi[r][i] = (q2[i] >> sh) & 0x0f0f0f0fu;  // elements 16 + 4i ..
        }
        if constexpr (Q5) {
          const uint32_t h1[4] = {hb[r].x, hb[r].y, hb[r].z, hb[r].w}, h2[4] = {hb2[r].x, hb2[r].y, hb2[r].z, hb2[r].w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            lo[r][i] |= ((h1[i] >> v) & 0x01010101u) << 4;
            hi[r][i] |= ((h2[i] >> v) & 0x01010101u) << 4;
          }
        }
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          lo[r][i] = q[i] & 0x0f0f0f0fu;         // sub-block 2c, elements 16*half + 4i ..
          hi[r][i] = (q[i] >> 4) & 0x0f0f0f0fu;  // sub-block 2c+1, same elements
        }
        if constexpr (Q5) {
          const uint32_t h[4] = {hb[r].x, hb[r].y, hb[r].z, hb[r].w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            lo[r][i] |= ((h[i] >> (2 * c)) & 0x01010101u) << 4;
            hi[r][i] |= ((h[i] >> (2 * c + 1)) & 0x01010101u) << 4;
          }
        }
      }
      const uint4 h = hv[r];
      const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
      const float dmin = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x >> 16)));
      uint32_t sc, mn;
      if (v < 4) {
        sc = header_byte(h, v) & 63u;
        mn = header_byte(h, v + 4) & 63u;
      } else {
        sc = (header_byte(h, v + 4) & 0x0fu) | ((header_byte(h, v - 4) >> 6) << 4);
        mn = (header_byte(h, v + 4) >> 4) | ((header_byte(h, v) >> 6) << 4);
      }
      dw[r] = d * static_cast<float>(sc);
      nmw[r] = -(dmin * static_cast<float>(mn));
    }
    Steps nxt = cur;
    nxt.next();
    if (nxt.group < groups) load(nxt);  // in flight while this step computes and reduces

    const int64_t u = sb * 8 + v;  // the unit (sub-block) this lane owns
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {  // uniform: every lane takes part in the shuffles
        int4 a0 = make_int4(0, 0, 0, 0), a1 = a0;
        float2 ds = make_float2(0.0f, 0.0f);
        if (valid) {
          if constexpr (Pair) {
            const int8_t* xb = xq + (t0 + t) * cols + sb * 256 + 32 * v;  // own sub-block
            a0 = *reinterpret_cast<const int4*>(xb);
            a1 = *reinterpret_cast<const int4*>(xb + 16);
          } else {
            const int8_t* xb = xq + (t0 + t) * cols + sb * 256 + 64 * c + 16 * half;
            a0 = *reinterpret_cast<const int4*>(xb);       // sub-block 2c
            a1 = *reinterpret_cast<const int4*>(xb + 32);  // sub-block 2c+1
          }
          ds = xm[(t0 + t) * units + u];
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          int plo = dp4a(static_cast<int>(lo[r][0]), a0.x, 0);
          plo = dp4a(static_cast<int>(lo[r][1]), a0.y, plo);
          plo = dp4a(static_cast<int>(lo[r][2]), a0.z, plo);
          plo = dp4a(static_cast<int>(lo[r][3]), a0.w, plo);
          int phi = dp4a(static_cast<int>(hi[r][0]), a1.x, 0);
          phi = dp4a(static_cast<int>(hi[r][1]), a1.y, phi);
          phi = dp4a(static_cast<int>(hi[r][2]), a1.z, phi);
          phi = dp4a(static_cast<int>(hi[r][3]), a1.w, phi);
          int isum;
          if constexpr (Pair) {
            isum = plo + phi;
          } else {
            // Lane 2c owns sub-block 2c (keeps plo, sends phi); lane 2c+1 the other way.
            const int mine = half ? phi : plo;
            isum = mine + __shfl_xor_sync(0xffffffffu, half ? plo : phi, 1);
          }
          if (valid) {
            acc[r][t] = fmaf(dw[r] * static_cast<float>(isum), ds.x, acc[r][t]);
            acc[r][t] = fmaf(nmw[r], ds.y, acc[r][t]);
          }
        }
      }
    }
    if (cur.phase == phases - 1) {
      const Segment sg = gemv_segment<R>(ms, cur.group);
      finish<R, NT>(acc, red[parity], sg.row0, sg.rows, t0, nt, sg.y, sg.bias);
      parity ^= 1;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    }
    cur = nxt;
  }
}

}  // namespace memra::cuda::i8
