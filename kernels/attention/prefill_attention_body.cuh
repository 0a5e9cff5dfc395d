// The prefill attention kernel's body (prefill_attention_mma.cu has the contract and
// the design), written once against a small set of primitives `Ops` so that the same
// code runs on the GPU (DeviceOps in prefill_attention_mma.cu: ldmatrix, mma.sync,
// shuffles, barriers) and in a host emulation of a CTA (tests/cuda: 128 host threads,
// the warp-collective primitives implemented from the PTX ISA's fragment layouts),
// which checks the index math, the masks and the schedule without a GPU.
//
// Ops provides: int tid(), int cta(), uint32_t smem() (shared-memory byte address of
// the dynamic buffer), st_shared_v4(addr, w0..w3), ldmatrix_x4(addr, r[4]),
// ldmatrix_x4_trans(addr, r[4]), mma(d[4], a[4], b0, b1) (m16n8k16 bf16, f32 acc),
// float shfl_xor(v, mask), sync() (the CTA barrier), syncwarp(), split2(a, b, hi, lo) (bf16x2 hi
// and lo words, a in the low half), load8(src, v[8]), load8_16bit(src, w[4]) (8 16-bit
// elements as four words, the lower index in each low half), store2(dst, x, y); for an f16
// cache also mma_f16 and split2_f16 (the same with f16 operands); for an fp8 cache
// load_f32(src) and load8_fp8_bf16(src, w[4]) (8 e4m3 codes as exact bf16, four words).
//
// The KV cache element KvT is float (each K/V value split into bf16 hi + lo like q and
// P: three mma per product) or uint16_t, bf16 bits (a bf16 KV cache): the values are
// exact bf16 already, so they are staged as the hi plane as they are and their lo term,
// exactly zero, is skipped (two mma per product: q_hi·k + q_lo·k, P_hi·v + P_lo·v), or
// PaF16, f16 bits (an f16 KV cache): the same with f16 operands (q and P split into f16
// hi + lo, K/V exact as stored, mma_f16), as the f16 decode kernel; or PaFp8, e4m3
// codes (an fp8 cache: blocks of codes, then one f32 scale per position and kv head,
// kernels/attention/attention_ref.hpp): the codes staged as exact bf16 (the hi plane, no
// lo), a K row's scale multiplying its scores and a V row's scale its weights after the
// softmax sums, as the fp8 decode kernel.
#pragma once

#include <math.h>
#include <stdint.h>

#include "kernels/attention/kv_fp8_layout.hpp"
#include "kernels/attention/prefill_attention_layout.hpp"

#if defined(__CUDACC__)
#define MEMRA_PA_FN __device__ __forceinline__
#define MEMRA_PA_UNROLL _Pragma("unroll")
#else
#define MEMRA_PA_FN inline
#define MEMRA_PA_UNROLL
#endif

namespace memra::attn {

MEMRA_PA_FN int32_t pa_first_position(int32_t pos, int32_t window) {
  return window > 0 ? (pos - window + 1 > 0 ? pos - window + 1 : 0) : 0;
}

MEMRA_PA_FN int64_t pa_slot_offset(const int32_t* table, int32_t position, int32_t block_size, int64_t row_width) {
  const int64_t block = table[position / block_size];
  return (block * block_size + position % block_size) * row_width;
}

// Byte offset of 16-byte chunk c (8 bf16) of row r in a plane of D bf16 per row. The
// xor spreads the 8 rows an ldmatrix phase reads (same logical chunk) over 8
// distinct chunks of an aligned group of 8, i.e. all 32 banks.
template <int D>
MEMRA_PA_FN uint32_t pa_swz(int r, int c) {
  return static_cast<uint32_t>(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

// 8 consecutive floats into one 16-byte chunk of the hi plane and one of the lo plane
// (bf16 operands; f16 with OpsF16, the f16 cache's Q planes).
template <class Ops, bool OpsF16 = false>
MEMRA_PA_FN void pa_store_chunk(Ops& ops, uint32_t hi_plane, uint32_t lo_plane, uint32_t off, const float (&v)[8]) {
  uint32_t h[4], l[4];
MEMRA_PA_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (OpsF16) ops.split2_f16(v[2 * i], v[2 * i + 1], h[i], l[i]);
    else ops.split2(v[2 * i], v[2 * i + 1], h[i], l[i]);
  }
  ops.st_shared_v4(hi_plane + off, h[0], h[1], h[2], h[3]);
  ops.st_shared_v4(lo_plane + off, l[0], l[1], l[2], l[3]);
}

// An f16 KV element (its bits).
struct PaF16 {
  uint16_t bits;
};

// An fp8 KV element (its bits).
struct PaFp8 {
  uint8_t bits;
};

// K/V with a lo plane: f32 values are split into bf16 hi + lo; 16-bit and fp8 ones are the hi plane.
template <class KvT>
struct PaKvSplit {
  static constexpr bool value = true;
};
template <>
struct PaKvSplit<uint16_t> {
  static constexpr bool value = false;
};
template <>
struct PaKvSplit<PaF16> {
  static constexpr bool value = false;
};
template <>
struct PaKvSplit<PaFp8> {
  static constexpr bool value = false;
};

// The mma's operand type: f16 for an f16 cache (its K/V exact), bf16 otherwise.
template <class KvT>
struct PaF16Operands {
  static constexpr bool value = false;
};
template <>
struct PaF16Operands<PaF16> {
  static constexpr bool value = true;
};
template <class KvT, class Ops>
MEMRA_PA_FN void pa_split2(Ops& ops, float a, float b, uint32_t& hi, uint32_t& lo) {
  if constexpr (PaF16Operands<KvT>::value) ops.split2_f16(a, b, hi, lo);
  else ops.split2(a, b, hi, lo);
}
template <class KvT, class Ops>
MEMRA_PA_FN void pa_mma(Ops& ops, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (PaF16Operands<KvT>::value) ops.mma_f16(d, a, b0, b1);
  else ops.mma(d, a, b0, b1);
}

// One chunk of 8 elements of a KV row as loaded: 8 floats (the f32 cache, split when
// staged), or 8 exact 16-bit operands in four words (bf16, f16, fp8 codes as bf16), the
// lower index in each low half.
template <class KvT>
struct PaKvChunk {
  uint32_t w[4];
};
template <>
struct PaKvChunk<float> {
  float v[8];
};

template <class Ops>
MEMRA_PA_FN void pa_load_chunk(Ops& ops, const float* src, PaKvChunk<float>& c) { ops.load8(src, c.v); }
template <class Ops, class KvT>
MEMRA_PA_FN void pa_load_chunk(Ops& ops, const KvT* src, PaKvChunk<KvT>& c) {  // bf16, f16
  ops.load8_16bit(reinterpret_cast<const uint16_t*>(src), c.w);
}
// The 8 elements at chunk c of (pos, the loader's kv head): one slot offset for the plain
// caches; an fp8 cache's codes per kv_fp8_layout.hpp.
template <int D, class Ops, class KvT>
MEMRA_PA_FN void pa_load_kv(Ops& ops, const KvT* cache, const int32_t* table, int32_t pos, int32_t block_size,
                            int64_t row_width, int64_t head_offset, int c, PaKvChunk<KvT>& out) {
  pa_load_chunk(ops, cache + pa_slot_offset(table, pos, block_size, row_width) + head_offset + c * 8, out);
}
template <int D>
MEMRA_PA_FN Fp8KvSlot pa_fp8_slot(const int32_t* table, int32_t pos, int32_t block_size, int64_t row_width,
                                  int64_t head_offset) {
  return fp8_kv_slot(table[pos / block_size], pos % block_size, head_offset / D, block_size, row_width / D, D);
}
template <int D, class Ops>
MEMRA_PA_FN void pa_load_kv(Ops& ops, const PaFp8* cache, const int32_t* table, int32_t pos, int32_t block_size,
                            int64_t row_width, int64_t head_offset, int c, PaKvChunk<PaFp8>& out) {
  const Fp8KvSlot slot = pa_fp8_slot<D>(table, pos, block_size, row_width, head_offset);
  ops.load8_fp8_bf16(reinterpret_cast<const uint8_t*>(cache) + slot.codes + c * 8, out.w);
}
// The scale of (pos, kv head head_offset / D) in an fp8 cache.
template <int D, class Ops>
MEMRA_PA_FN float pa_fp8_scale(Ops& ops, const PaFp8* cache, const int32_t* table, int32_t pos, int32_t block_size,
                               int64_t row_width, int64_t head_offset) {
  return ops.load_f32(reinterpret_cast<const uint8_t*>(cache) +
                      pa_fp8_slot<D>(table, pos, block_size, row_width, head_offset).scale);
}

// A warp's scores or weights s (n-tile n: positions j0 + 8n + 2 t4 + (e & 1) in element
// e) each times its position's row scale in an fp8 cache; positions outside [lo, hi] (not
// staged by the CTA) times 0.
template <int D, int N, class Ops>
MEMRA_PA_FN void pa_scale_fp8_rows(Ops& ops, const PaFp8* cache, const int32_t* table, int32_t block_size, int64_t row_width,
                                   int64_t head_offset, int32_t j0, int t4, int32_t lo, int32_t hi, float (&s)[N][4]) {
MEMRA_PA_UNROLL
  for (int n = 0; n < N; ++n)
MEMRA_PA_UNROLL
    for (int e = 0; e < 2; ++e) {
      const int32_t j = j0 + 8 * n + 2 * t4 + e;
      const float sc = j >= lo && j <= hi ? pa_fp8_scale<D>(ops, cache, table, j, block_size, row_width, head_offset) : 0.0f;
      s[n][e] = s[n][e] * sc;
      s[n][2 + e] = s[n][2 + e] * sc;
    }
}

template <class KvT>
MEMRA_PA_FN void pa_zero_chunk(PaKvChunk<KvT>& c) {
MEMRA_PA_UNROLL
  for (int e = 0; e < 4; ++e) c.w[e] = 0u;  // +0 in every 16-bit type
}
MEMRA_PA_FN void pa_zero_chunk(PaKvChunk<float>& c) {
MEMRA_PA_UNROLL
  for (int e = 0; e < 8; ++e) c.v[e] = 0.0f;
}
// 16-bit operands: the hi plane only (lo is never read); f32: split into both.
template <class Ops, class KvT>
MEMRA_PA_FN void pa_store_kv_chunk(Ops& ops, uint32_t hi_plane, uint32_t, uint32_t off, const PaKvChunk<KvT>& c) {
  ops.st_shared_v4(hi_plane + off, c.w[0], c.w[1], c.w[2], c.w[3]);
}
template <class Ops>
MEMRA_PA_FN void pa_store_kv_chunk(Ops& ops, uint32_t hi_plane, uint32_t lo_plane, uint32_t off, const PaKvChunk<float>& c) {
  pa_store_chunk(ops, hi_plane, lo_plane, off, c.v);
}

// a·b with b a KV operand: hi·hi, lo·hi, then hi·lo unless the cache is bf16 or f16 (b's lo is 0).
template <class KvT, class Ops>
MEMRA_PA_FN void pa_mma_kv(Ops& ops, float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0,
                           uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  pa_mma<KvT>(ops, d, ah, bh0, bh1);
  pa_mma<KvT>(ops, d, al, bh0, bh1);
  if constexpr (PaKvSplit<KvT>::value) pa_mma<KvT>(ops, d, ah, bl0, bl1);
}

// One KV tile (kPrefillTileN positions x D elements of one kv head) as the thread's
// share of 8-element chunks: chunk job i of thread tid is idx = tid + i * threads, row
// idx / (D/8), chunk idx % (D/8). Positions outside [lo, hi] are zeros (never read).
template <int D, class KvT>
struct PaTileLoader {
  static constexpr int kChunks = D / 8;                                     // per row
  static constexpr int kJobs = kPrefillTileN * kChunks / kPrefillThreads;  // per thread
  static_assert(kPrefillTileN * kChunks % kPrefillThreads == 0, "whole jobs per thread");

  const int32_t* table;
  int32_t block_size, lo, hi;
  int64_t row_width, head_offset;

  template <class Ops>
  MEMRA_PA_FN void load(Ops& ops, const KvT* cache, int32_t j0, PaKvChunk<KvT> (&buf)[kJobs]) const {
MEMRA_PA_UNROLL
    for (int i = 0; i < kJobs; ++i) {
      const int idx = ops.tid() + i * kPrefillThreads;
      const int r = idx / kChunks, c = idx % kChunks;
      const int32_t pos = j0 + r;
      if (pos >= lo && pos <= hi) {
        pa_load_kv<D>(ops, cache, table, pos, block_size, row_width, head_offset, c, buf[i]);
      } else {
        pa_zero_chunk(buf[i]);
      }
    }
  }
  template <class Ops>
  MEMRA_PA_FN void store(Ops& ops, uint32_t hi_plane, uint32_t lo_plane, const PaKvChunk<KvT> (&buf)[kJobs]) const {
MEMRA_PA_UNROLL
    for (int i = 0; i < kJobs; ++i) {
      const int idx = ops.tid() + i * kPrefillThreads;
      pa_store_kv_chunk(ops, hi_plane, lo_plane, pa_swz<D>(idx / kChunks, idx % kChunks), buf[i]);
    }
  }
};

template <int D, class KvT, class Ops>
MEMRA_PA_FN void prefill_attention_body(Ops& ops, const float* __restrict__ q, const KvT* __restrict__ k_cache,
                                        const KvT* __restrict__ v_cache, int32_t heads, int32_t kv_heads,
                                        int32_t block_size, const int32_t* __restrict__ positions,
                                        const int32_t* __restrict__ block_tables, int32_t max_blocks, float scale,
                                        int32_t window, float softcap, const int32_t* __restrict__ tasks,
                                        float* __restrict__ out) {
  constexpr int kTileN = kPrefillTileN, kRows = kPrefillRows;
  constexpr int kChunks = D / 8;
  constexpr int kPlaneQ = kRows * D * 2, kPlaneKV = kTileN * D * 2;  // bytes
  const int tid = ops.tid(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const uint32_t base = ops.smem();
  const uint32_t q_hi = base + static_cast<uint32_t>(warp * 2 * kPlaneQ), q_lo = q_hi + kPlaneQ;
  const uint32_t k_hi = base + static_cast<uint32_t>(kPrefillWarps * 2 * kPlaneQ), k_lo = k_hi + kPlaneKV;
  const uint32_t v_hi = k_lo + kPlaneKV, v_lo = v_hi + kPlaneKV;

  const int32_t* cta = tasks + static_cast<int64_t>(ops.cta()) * kPrefillWarps * kPrefillTaskInts;
  const int32_t* task = cta + warp * kPrefillTaskInts;
  const int head = task[0];  // -1: idle warp (stages tiles, computes nothing)
  const int group = heads / kv_heads;
  const int kvh = cta[0] / group;
  const int32_t* table = block_tables + static_cast<int64_t>(cta[1]) * max_blocks;
  const int64_t row_width = static_cast<int64_t>(kv_heads) * D;
  const int64_t q_row = static_cast<int64_t>(heads) * D;

  // Positions the CTA stages: its rows' union [first(min), max]; tiles j_lo..j_hi.
  constexpr bool kSplitKv = PaKvSplit<KvT>::value;  // f32 cache: K/V lo planes exist
  constexpr bool kFp8 = sizeof(KvT) == 1;            // fp8 cache: the rows' scales apply to scores and weights
  const PaTileLoader<D, KvT> ld{table, block_size, pa_first_position(cta[4], window), cta[5], row_width,
                           static_cast<int64_t>(kvh) * D};
  const int j_lo = ld.lo / kTileN, j_hi = ld.hi / kTileN;
  // The warp's tiles: from its earliest present row's first tile to its rows' last one.
  const int w_lo = head >= 0 ? pa_first_position(task[3], window) / kTileN : 1;
  const int w_hi = head >= 0 ? task[2] / kTileN : 0;

  // The warp's Q rows into its planes (absent rows: zeros).
  if (head >= 0) {
MEMRA_PA_UNROLL
    for (int i = 0; i < kRows * kChunks / 32; ++i) {
      const int idx = lane + 32 * i;
      const int r = idx / kChunks, c = idx % kChunks;
      const int32_t t = task[kPrefillTaskRows + r];
      float v[8];
      if (t >= 0) {
        ops.load8(q + t * q_row + static_cast<int64_t>(head) * D + c * 8, v);
      } else {
MEMRA_PA_UNROLL
        for (int e = 0; e < 8; ++e) v[e] = 0.0f;
      }
      pa_store_chunk<Ops, PaF16Operands<KvT>::value>(ops, q_hi, q_lo, pa_swz<D>(r, c), v);
    }
  }
  // This thread's two rows: slot g (accumulator elements 0, 1) and g + 8 (2, 3).
  int32_t row_t[2], row_pos[2], row_first[2];
MEMRA_PA_UNROLL
  for (int h = 0; h < 2; ++h) {
    row_t[h] = head >= 0 ? task[kPrefillTaskRows + g + 8 * h] : -1;
    row_pos[h] = row_t[h] >= 0 ? positions[row_t[h]] : -1;  // -1: masks every position
    row_first[h] = row_t[h] >= 0 ? pa_first_position(row_pos[h], window) : 0;
  }

  float o[D / 8][4];
MEMRA_PA_UNROLL
  for (int n = 0; n < D / 8; ++n)
MEMRA_PA_UNROLL
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  PaKvChunk<KvT> buf[PaTileLoader<D, KvT>::kJobs];
  ld.load(ops, k_cache, j_lo * kTileN, buf);
  ld.store(ops, k_hi, k_lo, buf);
  ops.sync();  // K tile j_lo and every warp's Q planes

  for (int jt = j_lo; jt <= j_hi; ++jt) {
    const int32_t j0 = jt * kTileN;
    const bool active = head >= 0 && jt >= w_lo && jt <= w_hi;  // warp-uniform
    ld.load(ops, v_cache, j0, buf);  // in flight during S = QK^T

    float s[kTileN / 8][4];
    bool dead[2] = {false, false};
    if (active) {
      ops.syncwarp();  // reconverge after the per-lane branches of the loads before the mma
MEMRA_PA_UNROLL
      for (int n = 0; n < kTileN / 8; ++n)
MEMRA_PA_UNROLL
        for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
MEMRA_PA_UNROLL
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t ah[4], al[4];
        ops.ldmatrix_x4(q_hi + pa_swz<D>(lane & 15, ks * 2 + (lane >> 4)), ah);
        ops.ldmatrix_x4(q_lo + pa_swz<D>(lane & 15, ks * 2 + (lane >> 4)), al);
MEMRA_PA_UNROLL
        for (int np = 0; np < kTileN / 16; ++np) {
          // K rows np*16 .. +15 (positions) as B: [0],[1] n-tile 2np, [2],[3] n-tile 2np+1.
          const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int c = ks * 2 + ((lane >> 3) & 1);
          uint32_t bh[4], bl[4] = {0u, 0u, 0u, 0u};
          ops.ldmatrix_x4(k_hi + pa_swz<D>(r, c), bh);
          if constexpr (kSplitKv) ops.ldmatrix_x4(k_lo + pa_swz<D>(r, c), bl);
          pa_mma_kv<KvT>(ops, s[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
          pa_mma_kv<KvT>(ops, s[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
        }
      }
      // Element e of n-tile n: row slot g + 8*(e>>1), position j0 + 8n + 2*t4 + (e&1).
      if constexpr (kFp8)  // each score times its K row's scale (positions the CTA staged)
        pa_scale_fp8_rows<D>(ops, k_cache, table, block_size, row_width, ld.head_offset, j0, t4, ld.lo, ld.hi, s);
MEMRA_PA_UNROLL
      for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
MEMRA_PA_UNROLL
        for (int n = 0; n < kTileN / 8; ++n)
MEMRA_PA_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int32_t j = j0 + 8 * n + 2 * t4 + e;
            float v = s[n][2 * h + e] * scale;
            if (softcap > 0.0f) v = softcap * tanhf(v / softcap);
            if (j < row_first[h] || j > row_pos[h]) v = -INFINITY;
            s[n][2 * h + e] = v;
            tile_max = fmaxf(tile_max, v);
          }
        tile_max = fmaxf(tile_max, ops.shfl_xor(tile_max, 1));
        tile_max = fmaxf(tile_max, ops.shfl_xor(tile_max, 2));
        const float m_new = fmaxf(m[h], tile_max);
        float alpha = 1.0f, sum = 0.0f;
        if (m_new == -INFINITY) {
          dead[h] = true;  // nothing seen yet: P = 0, and O is reset after the P·V mma
MEMRA_PA_UNROLL
          for (int n = 0; n < kTileN / 8; ++n)
MEMRA_PA_UNROLL
            for (int e = 0; e < 2; ++e) s[n][2 * h + e] = 0.0f;
        } else {
          alpha = expf(m[h] - m_new);  // m[h] = -inf: exactly 0
MEMRA_PA_UNROLL
          for (int n = 0; n < kTileN / 8; ++n)
MEMRA_PA_UNROLL
            for (int e = 0; e < 2; ++e) {
              const float p = expf(s[n][2 * h + e] - m_new);  // masked: expf(-inf) = 0
              s[n][2 * h + e] = p;
              sum = sum + p;
            }
          m[h] = m_new;
        }
        l[h] = l[h] * alpha + sum;
MEMRA_PA_UNROLL
        for (int n = 0; n < D / 8; ++n) {
          o[n][2 * h] = o[n][2 * h] * alpha;
          o[n][2 * h + 1] = o[n][2 * h + 1] * alpha;
        }
      }
    }

    ld.store(ops, v_hi, v_lo, buf);
    ops.sync();  // V tile jt staged; every warp is done with K tile jt
    if (jt < j_hi) ld.load(ops, k_cache, j0 + kTileN, buf);  // in flight during O += P·V

    if (active) {
      ops.syncwarp();
      if constexpr (kFp8)  // each weight times its V row's scale (after the sums l took them)
        pa_scale_fp8_rows<D>(ops, v_cache, table, block_size, row_width, ld.head_offset, j0, t4, ld.lo, ld.hi, s);
MEMRA_PA_UNROLL
      for (int kk = 0; kk < kTileN / 16; ++kk) {
        // P as the A fragment (positions kk*16 .. +15) straight from the S accumulators.
        uint32_t ph[4], pl[4];
        pa_split2<KvT>(ops, s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);          // row g, k 2t4
        pa_split2<KvT>(ops, s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);          // row g+8, k 2t4
        pa_split2<KvT>(ops, s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);  // row g, k 2t4+8
        pa_split2<KvT>(ops, s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);  // row g+8, k 2t4+8
MEMRA_PA_UNROLL
        for (int dp = 0; dp < D / 16; ++dp) {
          // V rows kk*16 .. +15 (positions), dims dp*16 .. +15, transposed into B:
          // [0],[1] n-tile 2dp (dims +0..7), [2],[3] n-tile 2dp+1 (dims +8..15).
          const int r = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int c = dp * 2 + (lane >> 4);
          uint32_t vh[4], vl[4] = {0u, 0u, 0u, 0u};
          ops.ldmatrix_x4_trans(v_hi + pa_swz<D>(r, c), vh);
          if constexpr (kSplitKv) ops.ldmatrix_x4_trans(v_lo + pa_swz<D>(r, c), vl);
          pa_mma_kv<KvT>(ops, o[2 * dp], ph, pl, vh[0], vh[1], vl[0], vl[1]);
          pa_mma_kv<KvT>(ops, o[2 * dp + 1], ph, pl, vh[2], vh[3], vl[2], vl[3]);
        }
      }
MEMRA_PA_UNROLL
      for (int h = 0; h < 2; ++h)
        if (dead[h])
MEMRA_PA_UNROLL
          for (int n = 0; n < D / 8; ++n) {
            o[n][2 * h] = 0.0f;
            o[n][2 * h + 1] = 0.0f;
          }
    }

    if (jt < j_hi) ld.store(ops, k_hi, k_lo, buf);
    ops.sync();  // K tile jt+1 staged; every warp is done with V tile jt
  }

  if (head < 0) return;
MEMRA_PA_UNROLL
  for (int h = 0; h < 2; ++h) {
    float total = l[h];
    total = total + ops.shfl_xor(total, 1);
    total = total + ops.shfl_xor(total, 2);
    if (row_t[h] < 0) continue;
    float* orow = out + row_t[h] * q_row + static_cast<int64_t>(head) * D;
MEMRA_PA_UNROLL
    for (int n = 0; n < D / 8; ++n) ops.store2(orow + 8 * n + 2 * t4, o[n][2 * h] / total, o[n][2 * h + 1] / total);
  }
}

}  // namespace memra::attn
