// Integer-activation GEMV for the super-block schemes whose blocks are not 16-byte
// multiples: q6_k (210 bytes) and iq4_xs (136 bytes) per 256 weights. The arithmetic
// and the order of every f32 sum are gemv_int8_ref.hpp's; the launch, the thread that
// owns a unit (u % 128), the step sequence, the reduction and PDL are gemv_int8.cuh's.
//
// Staging: a warp's run of a phase is 32 units = 4 super-blocks (840 / 544 bytes). A
// row's start is only 2-byte (q6_k) or 8-byte (iq4_xs) aligned, so the warp loads the
// 16-byte vectors that cover the run (from its start rounded down to 16: at most 14 bytes
// of the previous run, never before w, which is 16-byte aligned), coalesced and skipping
// L1, into shared memory; the vector that crosses the matrix's end is read in 2-byte
// pieces (never past the weight). Lane j then reads super-block j / 8, sub-block j % 8
// of the run from shared memory.
//  - q6_k: the unit's ql (32 bytes, 2-byte aligned) and qh (32 bytes) as words with one
//    funnel shift each; code = (nibble | 2 bits << 4) - 32 as a signed byte (__vsub4);
//    the two 16-element halves' dp4a sums times their int8 scales.
//  - iq4_xs: 8-byte aligned; each nibble goes through the 16-entry table by two byte
//    permutes and a select (prmt), so the int8 codes are the table's values exactly.
#pragma once

#include "kernels/matmul/gemv_int8.cuh"

namespace memra::cuda::i8 {

// Scheme 0 = q6_k, 1 = iq4_xs.
template <int Scheme>
struct SbStaged {
  static constexpr int kSbBytes = Scheme == 0 ? 210 : 136;
  static constexpr int kRunBytes = 4 * kSbBytes;         // one warp's 32 units
  static constexpr int kMaxLead = Scheme == 0 ? 14 : 8;  // run start - its 16-byte floor
  static constexpr int kMaxVecs = (kMaxLead + kRunBytes + 15) / 16;  // 54 or 35
  static constexpr int kVecsPerLane = (kMaxVecs + 31) / 32;          // 2
};

// The 16 bytes at p, of which only those before end (2-byte aligned) are read; the rest 0.
__device__ __forceinline__ uint4 ld_tail(const uint8_t* p, const uint8_t* end) {
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (p + 2 * i + 2 <= end) w[i >> 1] |= static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p + 2 * i)) << (16 * (i & 1));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// N words from a 2-byte aligned shared address (reads one word past them).
template <int N>
__device__ __forceinline__ void words_at(const uint8_t* p, uint32_t (&out)[N]) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* wp = reinterpret_cast<const uint32_t*>(a & ~static_cast<uintptr_t>(3));
  const unsigned sh = (a & 2u) ? 16u : 0u;
  uint32_t w[N + 1];
#pragma unroll
  for (int i = 0; i <= N; ++i) w[i] = wp[i];
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = __funnelshift_r(w[i], w[i + 1], sh);
}

// Four 4-bit codes (one per byte, high nibbles clear) -> the iq4 table's int8 values.
__device__ __forceinline__ uint32_t iq4_lookup(uint32_t n) {
  constexpr uint32_t t0 = 0xbfad9881u, t1 = 0xf6eaddcfu, t2 = 0x26190d01u, t3 = 0x71594535u;  // kIq4nlValues
  const uint32_t sel = (n & 0xfu) | ((n >> 4) & 0xf0u) | ((n >> 8) & 0xf00u) | ((n >> 12) & 0xf000u);
  const uint32_t lo = __byte_perm(t0, t1, sel & 0x7777u);  // codes 0..7
  const uint32_t hi = __byte_perm(t2, t3, sel & 0x7777u);  // codes 8..15
  return __byte_perm(lo, hi, 0x3210u | ((sel & 0x8888u) >> 1));
}

template <int Scheme, int R, int NT>
__device__ __forceinline__ void gemv_sb_staged(const Mats& ms, int64_t row_bytes, int64_t cols,
                                               const int8_t* __restrict__ xq, const float2* __restrict__ xm, int64_t m) {
  using S = SbStaged<Scheme>;
  constexpr int BB = S::kSbBytes;
  __shared__ __align__(16) uint8_t stage[kWarps][R][S::kVecsPerLane * 32 * 16];
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

  // Units of this warp's run in phase p: a multiple of 8 (cols % 256 == 0).
  auto run_units = [&](int p) {
    const int64_t left = units - (static_cast<int64_t>(p) * kPhaseUnits + 32 * warp);
    return left <= 0 ? 0 : (left < 32 ? static_cast<int>(left) : 32);
  };
  // The first byte of row r's run in step st (offset 0 for rows past the matrix).
  auto run_start = [&](const Segment& sg, int r, int phase) {
    const int64_t row = sg.row0 + r < sg.rows ? sg.row0 + r : 0;
    return sg.w + row * row_bytes + (static_cast<int64_t>(phase) * kPhaseUnits + 32 * warp) / 8 * BB;
  };
  uint4 v[R][S::kVecsPerLane];
  auto load = [&](const Steps& st) {
    const int bytes = run_units(st.phase) / 8 * BB;
    const Segment sg = gemv_segment<R>(ms, st.group);
    const uint8_t* end = sg.w + sg.rows * row_bytes;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint8_t* src = run_start(sg, r, st.phase);
      const int lead = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15u);
      const uint8_t* base = src - lead;
      const int vecs = bytes == 0 ? 0 : (lead + bytes + 15) / 16;
#pragma unroll
      for (int i = 0; i < S::kVecsPerLane; ++i) {
        const int idx = lane + 32 * i;
        if (sg.row0 + r < sg.rows && idx < vecs) {
          const uint8_t* p = base + 16 * idx;
          v[r][i] = p + 16 <= end ? ld_stream(p) : ld_tail(p, end);
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
    const int nu = run_units(cur.phase);
    const Segment sg = gemv_segment<R>(ms, cur.group);
    int lead[R];
    __syncwarp();  // the previous step's shared reads are done
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const uint8_t* src = run_start(sg, r, cur.phase);
      lead[r] = static_cast<int>(reinterpret_cast<uintptr_t>(src) & 15u);
      const int vecs = nu == 0 ? 0 : (lead[r] + nu / 8 * BB + 15) / 16;
#pragma unroll
      for (int i = 0; i < S::kVecsPerLane; ++i) {
        const int idx = lane + 32 * i;
        if (idx < vecs) reinterpret_cast<uint4*>(stage[warp][r])[idx] = v[r][i];
      }
    }
    __syncwarp();
    Steps nxt = cur;
    nxt.next();
    if (nxt.group < groups) load(nxt);  // in flight while this step computes and reduces

    if (lane < nu) {
      const int64_t u = static_cast<int64_t>(cur.phase) * kPhaseUnits + 32 * warp + lane;
      const int g = lane & 7;
      // Per row: eight dp4a-ready words (word k paired with activation word k of the unit),
      // the integer scales of the unit's halves (iq4_xs: one) and the f32 factor d.
      uint32_t k8[R][8];
      int sc0[R], sc1[R];
      float dw[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint8_t* sp = stage[warp][r] + lead[r] + BB * (lane >> 3);
        if constexpr (Scheme == 0) {
          uint32_t ql[8], qh[8];
          words_at<8>(sp + 64 * (g >> 2) + 32 * (g & 1), ql);
          words_at<8>(sp + 128 + 32 * (g >> 2), qh);
          const unsigned ls = 4u * static_cast<unsigned>((g & 3) >> 1), hs = 2u * static_cast<unsigned>(g & 3);
#pragma unroll
          for (int i = 0; i < 8; ++i)
            k8[r][i] = __vsub4(((ql[i] >> ls) & 0x0f0f0f0fu) | (((qh[i] >> hs) & 0x03030303u) << 4), 0x20202020u);
          const uint32_t scw = *reinterpret_cast<const uint16_t*>(sp + 192 + 2 * g);
          sc0[r] = static_cast<int8_t>(scw & 0xffu);
          sc1[r] = static_cast<int8_t>(scw >> 8);
          dw[r] = __half2float(__ushort_as_half(*reinterpret_cast<const uint16_t*>(sp + 208)));
        } else {
          const uint2 h = *reinterpret_cast<const uint2*>(sp);
          const uint2 c0 = *reinterpret_cast<const uint2*>(sp + 8 + 16 * g);
          const uint2 c1 = *reinterpret_cast<const uint2*>(sp + 16 + 16 * g);
          const uint32_t cw[4] = {c0.x, c0.y, c1.x, c1.y};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            k8[r][i] = iq4_lookup(cw[i] & 0x0f0f0f0fu);             // elements 4i .. 4i+3
            k8[r][i + 4] = iq4_lookup((cw[i] >> 4) & 0x0f0f0f0fu);  // elements 16 + 4i ..
          }
          const int lo = static_cast<int>((h.y >> (4 * g)) & 0xfu), hi = static_cast<int>((h.x >> (16 + 2 * g)) & 3u);
          sc0[r] = (lo | (hi << 4)) - 32;
          sc1[r] = 0;
          dw[r] = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
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
            int p0 = dp4a(static_cast<int>(k8[r][0]), a0.x, 0);
            p0 = dp4a(static_cast<int>(k8[r][1]), a0.y, p0);
            p0 = dp4a(static_cast<int>(k8[r][2]), a0.z, p0);
            p0 = dp4a(static_cast<int>(k8[r][3]), a0.w, p0);
            int p1 = dp4a(static_cast<int>(k8[r][4]), a1.x, 0);
            p1 = dp4a(static_cast<int>(k8[r][5]), a1.y, p1);
            p1 = dp4a(static_cast<int>(k8[r][6]), a1.z, p1);
            p1 = dp4a(static_cast<int>(k8[r][7]), a1.w, p1);
            // q6_k: sc0 * (elements 0..15) + sc1 * (16..31); iq4_xs: ls * the whole dot.
            const int isum = Scheme == 0 ? sc0[r] * p0 + sc1[r] * p1 : sc0[r] * (p0 + p1);
            acc[r][t] = fmaf(static_cast<float>(isum), dw[r] * da, acc[r][t]);
          }
        }
      }
    }
    if (cur.phase == phases - 1) {
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
