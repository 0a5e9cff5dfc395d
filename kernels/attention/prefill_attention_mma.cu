// Prefill attention on tensor cores (module attention_prefill): the PROMPT rows of a
// step (memra_forward_batch.prompt_tokens) attend over the paged f32 KV cache with
// mma.sync.m16n8k16 (bf16 in, f32 accumulate; sm_90a and sm_120a), flash-attention
// style: one warp = 16 q rows (positions 16k..16k+15 of one sequence) of one q head,
// one CTA = 4 warps of one sequence and one kv head (grouped-query attention: the
// group's q heads share every K/V tile the CTA stages), looping over KV tiles of 64
// positions with an online softmax. Causal, sliding window and logit softcap.
// head_dim 64 and 128 (other sizes stay on the decode kernel, ops_attention.cpp).
//
// EXACTNESS CONTRACT (docs/ARCHITECTURE.md, "prefill attention"): a prompt row's
// output is bitwise a function of its position, its q and the KV of its sequence —
// not of how the prompt was chunked (chunked prefill, a prefix-cache hit starting
// mid-way), not of the other rows or sequences of the step, not of the CTA or warp
// the row lands in. Why it holds:
//  - KV tiles start at multiples of 64 from position 0, fixed. Row p processes tiles
//    floor(first(p)/64) .. floor(p/64) (first(p) = max(0, p - window + 1), or 0).
//  - A warp's rows are the positions 16k..16k+15 of one sequence, at slot p % 16, so
//    they all end in the same tile (64 % 16 == 0): no row ever sees a tile after its
//    own last one. A warp starts at the first tile of its earliest row; a later row
//    whose window starts further on sees fully masked tiles first: for such a row the
//    tile max stays -inf, its P is set to 0 and, after the P·V mma, its O to +0 — the
//    state (m = -inf, l = 0, O = +0) it had before, so those tiles are exact no-ops.
//  - Per row the arithmetic is a fixed sequence: S by mma over k = 0..head_dim in
//    steps of 16 (per step hi·hi, lo·hi, hi·lo), then *scale, softcap, mask, the
//    row max over the quad's 16 values + two xor shuffles (fmaxf: order-free), the
//    rescale alpha = expf(m_old - m_new), P = expf(s - m_new), each thread's partial
//    l = l*alpha + (its 16 P in order), O = O*alpha + P·V by mma over the tile's 64
//    positions in steps of 16 (hi·hi, lo·hi, hi·lo); at the end l = the quad's four
//    partials by two xor shuffles (commutative pairs: the same bits in every lane) and
//    out = O / l. An mma never mixes rows, so other rows (absent rows are zero q,
//    fully masked) cannot change a row's bits.
//  - Positions a CTA does not need (beyond its rows' last position or before their
//    first window position) are staged as zeros; they are masked for every row.
//
// Accuracy: every f32 operand x is split into bf16 hi = bf16(x), lo = bf16(x - hi);
// the products hi·hi + lo·hi + hi·lo are exact in f32 and miss only lo·lo and the
// split's residue, ~2^-16 of |x·y| worst, ~2^-17 typical. For q, k ~ N(0,1) and head
// dim 128 that is ~5e-6 absolute in a score; normalised MSE vs the f32 reference
// ~1e-11 (kernel-check bound kAttentionBound = 1e-9, the decode kernel's).
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/attention/prefill_attention_layout.hpp"

namespace {
using namespace memra::attn;

constexpr int kTileN = kPrefillTileN;
constexpr int kRows = kPrefillRows;
constexpr int kWarps = kPrefillWarps;
constexpr int kThreads = kPrefillThreads;

__device__ __forceinline__ int32_t first_position(int32_t pos, int32_t window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

__device__ __forceinline__ int64_t slot_offset(const int32_t* table, int32_t position, int32_t block_size,
                                               int64_t row_width) {
  const int64_t block = table[position / block_size];
  return (block * block_size + position % block_size) * row_width;
}

// Byte offset of 16-byte chunk c (8 bf16) of row r in a plane of D bf16 per row. The
// xor spreads the 8 rows an ldmatrix phase reads (same logical chunk) over 8
// distinct chunks of an aligned group of 8, i.e. all 32 banks.
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return static_cast<uint32_t>(r * (D * 2) + ((c ^ (r & 7)) << 4));
}

__device__ __forceinline__ uint32_t bf2_bits(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }

// (a, b) = hi + lo: hi = bf16(a), bf16(b) (round to nearest), lo = bf16 of the exact
// remainders. The low 16 bits hold a (the mma's lower k index).
__device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const float ha = __low2float(h), hb = __high2float(h);
  hi = bf2_bits(h);
  lo = bf2_bits(__floats2bfloat162_rn(isfinite(ha) ? a - ha : 0.0f, isfinite(hb) ? b - hb : 0.0f));
}

// 8 consecutive floats into one 16-byte chunk of the hi plane and one of the lo plane.
__device__ __forceinline__ void store_chunk(uint32_t hi_plane, uint32_t lo_plane, uint32_t off, const float (&v)[8]) {
  uint32_t h[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) split2(v[2 * i], v[2 * i + 1], h[i], l[i]);
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(hi_plane + off), "r"(h[0]), "r"(h[1]), "r"(h[2]), "r"(h[3]));
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(lo_plane + off), "r"(l[0]), "r"(l[1]), "r"(l[2]), "r"(l[3]));
}

__device__ __forceinline__ void load8(const float* src, float (&v)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(src);
  const float4 b = *reinterpret_cast<const float4*>(src + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a * b for one 16x8x16 tile (a: 4 registers of the A fragment, b: 2 of B).
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// The split product in its fixed order: hi·hi, lo·hi, hi·lo.
__device__ __forceinline__ void mma3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0,
                                     uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  mma(d, ah, bh0, bh1);
  mma(d, al, bh0, bh1);
  mma(d, ah, bl0, bl1);
}

// One KV tile (kTileN positions x D floats of one kv head) as the thread's share of
// 16-byte chunks: chunk job i of thread tid is idx = tid + i * kThreads, row idx / (D/8),
// chunk idx % (D/8). Positions outside [lo, hi] are zeros (never read from the cache).
template <int D>
struct TileLoader {
  static constexpr int kChunks = D / 8;                      // per row
  static constexpr int kJobs = kTileN * kChunks / kThreads;  // per thread
  static_assert(kTileN * kChunks % kThreads == 0, "whole jobs per thread");

  const int32_t* table;
  int32_t block_size, lo, hi;
  int64_t row_width, head_offset;

  __device__ __forceinline__ void load(const float* cache, int32_t j0, float (&buf)[kJobs][8]) const {
#pragma unroll
    for (int i = 0; i < kJobs; ++i) {
      const int idx = static_cast<int>(threadIdx.x) + i * kThreads;
      const int r = idx / kChunks, c = idx % kChunks;
      const int32_t pos = j0 + r;
      if (pos >= lo && pos <= hi) {
        load8(cache + slot_offset(table, pos, block_size, row_width) + head_offset + c * 8, buf[i]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) buf[i][e] = 0.0f;
      }
    }
  }
  __device__ __forceinline__ void store(uint32_t hi_plane, uint32_t lo_plane, const float (&buf)[kJobs][8]) const {
#pragma unroll
    for (int i = 0; i < kJobs; ++i) {
      const int idx = static_cast<int>(threadIdx.x) + i * kThreads;
      store_chunk(hi_plane, lo_plane, swz<D>(idx / kChunks, idx % kChunks), buf[i]);
    }
  }
};

// Dynamic shared memory: per warp a Q hi and lo plane [16][D] bf16, then the K hi,
// K lo, V hi, V lo planes [kTileN][D] bf16: 768 * D bytes (96 KB for D = 128).
template <int D>
__device__ __forceinline__ void prefill_attention(const float* __restrict__ q, const float* __restrict__ k_cache,
                                                  const float* __restrict__ v_cache, int32_t heads, int32_t kv_heads,
                                                  int32_t block_size, const int32_t* __restrict__ positions,
                                                  const int32_t* __restrict__ block_tables, int32_t max_blocks,
                                                  float scale, int32_t window, float softcap,
                                                  const int32_t* __restrict__ tasks, float* __restrict__ out) {
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  constexpr int kChunks = D / 8;
  constexpr int kPlaneQ = kRows * D * 2, kPlaneKV = kTileN * D * 2;  // bytes
  const uint32_t q_hi = base + static_cast<uint32_t>(warp * 2 * kPlaneQ), q_lo = q_hi + kPlaneQ;
  const uint32_t k_hi = base + static_cast<uint32_t>(kWarps * 2 * kPlaneQ), k_lo = k_hi + kPlaneKV;
  const uint32_t v_hi = k_lo + kPlaneKV, v_lo = v_hi + kPlaneKV;

  const int32_t* cta = tasks + static_cast<int64_t>(blockIdx.x) * kWarps * kPrefillTaskInts;
  const int32_t* task = cta + warp * kPrefillTaskInts;
  const int head = task[0];  // -1: idle warp (stages tiles, computes nothing)
  const int group = heads / kv_heads;
  const int kvh = cta[0] / group;
  const int32_t* table = block_tables + static_cast<int64_t>(cta[1]) * max_blocks;
  const int64_t row_width = static_cast<int64_t>(kv_heads) * D;
  const int64_t q_row = static_cast<int64_t>(heads) * D;

  // Positions the CTA stages: its rows' union [first(min), max]; tiles j_lo..j_hi.
  TileLoader<D> ld{table, block_size, first_position(cta[4], window), cta[5], row_width, static_cast<int64_t>(kvh) * D};
  const int j_lo = ld.lo / kTileN, j_hi = ld.hi / kTileN;
  // The warp's tiles: from its earliest present row's first tile to its rows' last one.
  const int w_lo = head >= 0 ? first_position(task[3], window) / kTileN : 1;
  const int w_hi = head >= 0 ? task[2] / kTileN : 0;

  // The warp's Q rows into its planes (absent rows: zeros).
  if (head >= 0) {
#pragma unroll
    for (int i = 0; i < kRows * kChunks / 32; ++i) {
      const int idx = lane + 32 * i;
      const int r = idx / kChunks, c = idx % kChunks;
      const int32_t t = task[kPrefillTaskRows + r];
      float v[8];
      if (t >= 0) {
        load8(q + t * q_row + static_cast<int64_t>(head) * D + c * 8, v);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = 0.0f;
      }
      store_chunk(q_hi, q_lo, swz<D>(r, c), v);
    }
  }
  // This thread's two rows: slot g (accumulator elements 0, 1) and g + 8 (2, 3).
  int32_t row_t[2], row_pos[2], row_first[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_t[h] = head >= 0 ? task[kPrefillTaskRows + g + 8 * h] : -1;
    row_pos[h] = row_t[h] >= 0 ? positions[row_t[h]] : -1;  // -1: masks every position
    row_first[h] = row_t[h] >= 0 ? first_position(row_pos[h], window) : 0;
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  float buf[TileLoader<D>::kJobs][8];
  ld.load(k_cache, j_lo * kTileN, buf);
  ld.store(k_hi, k_lo, buf);
  __syncthreads();  // K tile j_lo and every warp's Q planes

  for (int jt = j_lo; jt <= j_hi; ++jt) {
    const int32_t j0 = jt * kTileN;
    const bool active = head >= 0 && jt >= w_lo && jt <= w_hi;  // warp-uniform
    ld.load(v_cache, j0, buf);  // in flight during S = QK^T

    float s[kTileN / 8][4];
    bool dead[2] = {false, false};
    if (active) {
#pragma unroll
      for (int n = 0; n < kTileN / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks) {
        uint32_t ah[4], al[4];
        ldmatrix_x4(q_hi + swz<D>(lane & 15, ks * 2 + (lane >> 4)), ah);
        ldmatrix_x4(q_lo + swz<D>(lane & 15, ks * 2 + (lane >> 4)), al);
#pragma unroll
        for (int np = 0; np < kTileN / 16; ++np) {
          // K rows np*16 .. +15 (positions) as B: [0],[1] n-tile 2np, [2],[3] n-tile 2np+1.
          const int r = np * 16 + (lane & 7) + ((lane >> 4) << 3);
          const int c = ks * 2 + ((lane >> 3) & 1);
          uint32_t bh[4], bl[4];
          ldmatrix_x4(k_hi + swz<D>(r, c), bh);
          ldmatrix_x4(k_lo + swz<D>(r, c), bl);
          mma3(s[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
          mma3(s[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
        }
      }
      // Element e of n-tile n: row slot g + 8*(e>>1), position j0 + 8n + 2*t4 + (e&1).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int n = 0; n < kTileN / 8; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int32_t j = j0 + 8 * n + 2 * t4 + e;
            float v = s[n][2 * h + e] * scale;
            if (softcap > 0.0f) v = softcap * tanhf(v / softcap);
            if (j < row_first[h] || j > row_pos[h]) v = -INFINITY;
            s[n][2 * h + e] = v;
            tile_max = fmaxf(tile_max, v);
          }
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        const float m_new = fmaxf(m[h], tile_max);
        float alpha = 1.0f, sum = 0.0f;
        if (m_new == -INFINITY) {
          dead[h] = true;  // nothing seen yet: P = 0, and O is reset after the P·V mma
#pragma unroll
          for (int n = 0; n < kTileN / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) s[n][2 * h + e] = 0.0f;
        } else {
          alpha = expf(m[h] - m_new);  // m[h] = -inf: exactly 0
#pragma unroll
          for (int n = 0; n < kTileN / 8; ++n)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const float p = expf(s[n][2 * h + e] - m_new);  // masked: expf(-inf) = 0
              s[n][2 * h + e] = p;
              sum = sum + p;
            }
          m[h] = m_new;
        }
        l[h] = l[h] * alpha + sum;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o[n][2 * h] = o[n][2 * h] * alpha;
          o[n][2 * h + 1] = o[n][2 * h + 1] * alpha;
        }
      }
    }

    ld.store(v_hi, v_lo, buf);
    __syncthreads();  // V tile jt staged; every warp is done with K tile jt
    if (jt < j_hi) ld.load(k_cache, j0 + kTileN, buf);  // in flight during O += P·V

    if (active) {
#pragma unroll
      for (int kk = 0; kk < kTileN / 16; ++kk) {
        // P as the A fragment (positions kk*16 .. +15) straight from the S accumulators.
        uint32_t ph[4], pl[4];
        split2(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);          // row g, k 2t4
        split2(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);          // row g+8, k 2t4
        split2(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);  // row g, k 2t4+8
        split2(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);  // row g+8, k 2t4+8
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          // V rows kk*16 .. +15 (positions), dims dp*16 .. +15, transposed into B:
          // [0],[1] n-tile 2dp (dims +0..7), [2],[3] n-tile 2dp+1 (dims +8..15).
          const int r = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
          const int c = dp * 2 + (lane >> 4);
          uint32_t vh[4], vl[4];
          ldmatrix_x4_trans(v_hi + swz<D>(r, c), vh);
          ldmatrix_x4_trans(v_lo + swz<D>(r, c), vl);
          mma3(o[2 * dp], ph, pl, vh[0], vh[1], vl[0], vl[1]);
          mma3(o[2 * dp + 1], ph, pl, vh[2], vh[3], vl[2], vl[3]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
        if (dead[h])
#pragma unroll
          for (int n = 0; n < D / 8; ++n) {
            o[n][2 * h] = 0.0f;
            o[n][2 * h + 1] = 0.0f;
          }
    }

    if (jt < j_hi) ld.store(k_hi, k_lo, buf);
    __syncthreads();  // K tile jt+1 staged; every warp is done with V tile jt
  }

  if (head < 0) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = l[h];
    total = total + __shfl_xor_sync(0xffffffffu, total, 1);
    total = total + __shfl_xor_sync(0xffffffffu, total, 2);
    if (row_t[h] < 0) continue;
    float* orow = out + row_t[h] * q_row + static_cast<int64_t>(head) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      float2 v;
      v.x = o[n][2 * h] / total;
      v.y = o[n][2 * h + 1] / total;
      *reinterpret_cast<float2*>(orow + 8 * n + 2 * t4) = v;
    }
  }
}

}  // namespace

// grid (CTAs of the plan), kPrefillThreads threads, 768 * D bytes of dynamic shared
// memory. q, out: [tokens][heads * D]; caches: [blocks][block_size][kv_heads][D].
#define MEMRA_DEFINE_PREFILL_ATTENTION(D)                                                                           \
  extern "C" __global__ void __launch_bounds__(kThreads, 2) memra_prefill_attention_hd##D(                         \
      const float* q, const float* k_cache, const float* v_cache, int32_t heads, int32_t kv_heads,                 \
      int32_t block_size, const int32_t* positions, const int32_t* block_tables, int32_t max_blocks, float scale,   \
      int32_t sliding_window, float softcap, const int32_t* tasks, float* out) {                                    \
    prefill_attention<D>(q, k_cache, v_cache, heads, kv_heads, block_size, positions, block_tables, max_blocks,     \
                         scale, sliding_window, softcap, tasks, out);                                               \
  }
MEMRA_DEFINE_PREFILL_ATTENTION(64)
MEMRA_DEFINE_PREFILL_ATTENTION(128)
