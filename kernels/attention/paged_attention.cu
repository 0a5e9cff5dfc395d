// Attention over the paged KV cache (f32 or bf16), split over fixed chunks of kAttnChunk
// positions. Pass 1: one block per (token, head, chunk) computes the chunk's max
// score m, sum l of exp(s - m) and unnormalised output o. Pass 2: one block per
// (token, head) merges its chunks in chunk order. The chunking depends only on the
// token's own position (and the sliding window), so a token's output is bitwise the
// same in a prefill, a decode or a verify step and beside any other sequences.
// `rows` (nullable) lists the token rows to compute (a step whose prompt rows run the
// prefill kernel, prefill_attention_mma.cu): entry i of the launch is token rows[i]
// (i itself when rows is NULL); part_o/part_ml are indexed by i. A row's arithmetic is
// the same either way.
// memra_attention_chunk_bf16 reads a bf16 cache. Its block first stages the chunk's K
// and V rows (bf16, 16-byte loads, all in flight at once) in shared memory; then the
// f32 kernel's code runs on them, each element converted exactly to f32: every fmaf in
// the same order, so its rows are bitwise the f32 kernel's on a cache holding the same
// (bf16-representable) values (memra-kernel-check proves it). Staging keeps the code
// as small as the f32 kernel's while one round of load latency covers the chunk.
#include <cuda_bf16.h>
#include <stdint.h>

#include "kernels/common/reduce.cuh"

namespace {
constexpr int kAttnChunk = 64;   // positions per chunk (fixed: the split depends only on the position)
constexpr int kAttnThreads = 128;

__device__ __forceinline__ int32_t first_position(int32_t pos, int32_t window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

__device__ __forceinline__ float kv_load(const float* p) { return *p; }
__device__ __forceinline__ float kv_load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

__device__ __forceinline__ int64_t slot_offset(const int32_t* table, int32_t position, int32_t block_size,
                                               int64_t row_width) {
  const int64_t block = table[position / block_size];
  return (block * block_size + position % block_size) * row_width;
}
}  // namespace

// grid (tokens * kv_heads, max_chunks), kAttnThreads threads, dynamic shared memory
// group * (head_dim + kAttnChunk) + 4 * 8 * 128 floats, group = heads / kv_heads (bf16: the
// 4 * 8 * 128 floats overlap the staged K rows, and the V rows follow; ops_attention.cpp's
// decode_attention sizes it; head_dim a multiple of 8). One block serves
// every q head of one kv head (grouped-query attention), so each K and V row of the
// chunk is read once for the group instead of once per q head. Per q head the
// arithmetic is the single-head kernel's, in the same order: the dot product of lane
// i over dims i, i+32, ... then the warp butterfly; the max and the sum of
// exp(s - m) over positions tid, tid+128, ... then the block reduction; the output
// of dim i as four fmaf chains over the chunk's quarters (one per warp), added in
// warp order.
// part_o: [entries*heads][max_chunks][head_dim]; part_ml: [entries*heads][max_chunks][2].
template <class KvT>
__device__ __forceinline__ void attention_chunk(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads,
                                                int32_t kv_heads, int32_t head_dim, int32_t block_size,
                                                const int32_t* positions, const int32_t* seq_index,
                                                const int32_t* block_tables, int32_t max_blocks, float scale,
                                                int32_t sliding_window, float softcap, int32_t max_chunks, float* part_o,
                                                float* part_ml, const int32_t* rows) {
  constexpr bool kStaged = sizeof(KvT) == 2;  // bf16: K/V rows staged in shared memory
  extern __shared__ __align__(16) float smem[];
  __shared__ float scratch[32];
  const int group = heads / kv_heads;
  float* qs = smem;                          // [group][head_dim]
  float* scores = smem + group * head_dim;   // [group][kAttnChunk]
  const int64_t tk = blockIdx.x;
  const int64_t i_entry = tk / kv_heads;
  const int64_t t = rows ? rows[i_entry] : i_entry;
  const int kvh = static_cast<int>(tk % kv_heads);
  const int h0 = kvh * group;                // the group's first q head
  const int32_t pos = positions[t];
  const int32_t first = first_position(pos, sliding_window);
  const int32_t n = pos - first + 1;
  const int chunk = blockIdx.y;
  if (static_cast<int64_t>(chunk) * kAttnChunk >= n) return;
  const int32_t j0 = first + chunk * kAttnChunk;
  const int len = min(kAttnChunk, n - chunk * kAttnChunk);
  const int64_t row_width = static_cast<int64_t>(kv_heads) * head_dim;
  const int32_t* table = block_tables + static_cast<int64_t>(seq_index[t]) * max_blocks;
  const float* qg = q + (t * heads + h0) * static_cast<int64_t>(head_dim);
  for (int i = threadIdx.x; i < group * head_dim; i += kAttnThreads) qs[i] = qg[i];
  // bf16: the chunk's K rows at `staged_k` ([len][head_dim], later reused for `partial`),
  // its V rows at `staged_v`; row j of the chunk is position j0 + j.
  KvT* staged_k = reinterpret_cast<KvT*>(scores + group * kAttnChunk);
  KvT* staged_v = staged_k + (kStaged ? max(kAttnChunk * head_dim, 2 * 4 * 8 * 128) : 0);
  if constexpr (kStaged) {
    // 16-byte pieces, kBatch K and kBatch V loads per thread in flight, then their stores
    // (one batch covers a whole chunk at head_dim 128).
    constexpr int kBatch = 8;
    const int row_chunks = head_dim / 8;
    const int pieces = len * row_chunks;
    for (int base = threadIdx.x; base < pieces; base += kBatch * kAttnThreads) {
      uint4 kq[kBatch], vq[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * kAttnThreads;
        if (idx < pieces) {
          const int j = idx / row_chunks, c = idx - j * row_chunks;
          const int64_t off = slot_offset(table, j0 + j, block_size, row_width) + static_cast<int64_t>(kvh) * head_dim + c * 8;
          kq[u] = *reinterpret_cast<const uint4*>(k_cache + off);
          vq[u] = *reinterpret_cast<const uint4*>(v_cache + off);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * kAttnThreads;
        if (idx < pieces) {
          reinterpret_cast<uint4*>(staged_k)[idx] = kq[u];  // staged_k + j * head_dim + c * 8
          reinterpret_cast<uint4*>(staged_v)[idx] = vq[u];
        }
      }
    }
  }
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Scores: warp w takes positions w*16 .. w*16+15, four K rows in flight at a time
  // (head_dim <= 128 here; longer heads take the general loop).
  constexpr int kScorePerWarp = kAttnChunk / (kAttnThreads / 32);
  for (int jj0 = 0; jj0 < kScorePerWarp; jj0 += 4) {
    const KvT* kjs[4];
    float kv[4][4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = warp * kScorePerWarp + jj0 + u;
      const KvT* row = kStaged ? staged_k + static_cast<int64_t>(j) * head_dim
                               : k_cache + slot_offset(table, j0 + j, block_size, row_width) + static_cast<int64_t>(kvh) * head_dim;
      kjs[u] = j < len ? row : nullptr;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = lane + 32 * c;
        kv[u][c] = (kjs[u] && i < head_dim) ? kv_load(kjs[u] + i) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int j = warp * kScorePerWarp + jj0 + u;
      if (!kjs[u]) break;
      for (int g = 0; g < group; ++g) {
        const float* qh = qs + g * head_dim;
        float d = 0.0f;
        if (head_dim <= 128) {
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (lane + 32 * c < head_dim) d = fmaf(qh[lane + 32 * c], kv[u][c], d);
        } else {
          for (int i = lane; i < head_dim; i += 32) d = fmaf(qh[i], kv_load(kjs[u] + i), d);
        }
        d = memra::cuda::warp_sum(d);
        float s = d * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
        if (lane == 0) scores[g * kAttnChunk + j] = s;
      }
    }
  }
  __syncthreads();
  float ms[8], ls[8];  // per q head of the group (group <= 8 here; larger groups loop below)
  for (int g0 = 0; g0 < group; g0 += 8) {
    const int gn = min(8, group - g0);
    for (int gi = 0; gi < gn; ++gi) {
      float* sc = scores + (g0 + gi) * kAttnChunk;
      float m = -INFINITY;
      for (int j = threadIdx.x; j < len; j += kAttnThreads) m = fmaxf(m, sc[j]);
      m = memra::cuda::block_max(m, scratch);
      float l = 0.0f;
      for (int j = threadIdx.x; j < len; j += kAttnThreads) {
        const float p = expf(sc[j] - m);
        sc[j] = p;
        l += p;
      }
      l = memra::cuda::block_sum(l, scratch);  // its barriers also publish sc[]
      ms[gi] = m;
      ls[gi] = l;
    }
    // V: warp w takes the chunk's positions w*16 .. w*16+15 (an fmaf chain over them in
    // order, per q head and dim), lane l dims l, l+32, ...; then the four warps' partial
    // sums are added in warp order. Every position's V row is read by one warp, and
    // the sixteen rows of a warp are independent loads.
    constexpr int kWarps = kAttnThreads / 32, kPerWarp = kAttnChunk / kWarps;
    float* partial = scores + group * kAttnChunk;  // [kWarps][8][128]; bf16: over the staged K rows, read by now
    for (int i0 = 0; i0 < head_dim; i0 += 128) {
      float o[8][4];
#pragma unroll
      for (int gi = 0; gi < 8; ++gi)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[gi][c] = 0.0f;
      for (int jj = 0; jj < kPerWarp; ++jj) {
        const int j = warp * kPerWarp + jj;
        if (j >= len) break;
        const KvT* vj = kStaged ? staged_v + static_cast<int64_t>(j) * head_dim
                                : v_cache + slot_offset(table, j0 + j, block_size, row_width) + static_cast<int64_t>(kvh) * head_dim;
        float vv[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = i0 + lane + 32 * c;
          vv[c] = i < head_dim ? kv_load(vj + i) : 0.0f;
        }
#pragma unroll
        for (int gi = 0; gi < 8; ++gi) {
          if (gi < gn) {
            const float p = scores[(g0 + gi) * kAttnChunk + j];
#pragma unroll
            for (int c = 0; c < 4; ++c) o[gi][c] = fmaf(p, vv[c], o[gi][c]);
          }
        }
      }
#pragma unroll
      for (int gi = 0; gi < 8; ++gi)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (gi < gn && i0 + lane + 32 * c < head_dim) partial[(warp * 8 + gi) * 128 + lane + 32 * c] = o[gi][c];
      __syncthreads();
      for (int idx = threadIdx.x; idx < gn * 128; idx += kAttnThreads) {
        const int gi = idx / 128, il = idx % 128, i = i0 + il;
        if (i >= head_dim) continue;
        float sum = partial[(0 * 8 + gi) * 128 + il];
        for (int w = 1; w < kWarps; ++w) sum = __fadd_rn(sum, partial[(w * 8 + gi) * 128 + il]);
        const int64_t part = (i_entry * heads + h0 + g0 + gi) * max_chunks + chunk;
        part_o[part * head_dim + i] = sum;
      }
      __syncthreads();  // partial is reused by the next dims / head group
    }
    if (threadIdx.x == 0) {
      for (int gi = 0; gi < gn; ++gi) {
        const int64_t part = (i_entry * heads + h0 + g0 + gi) * max_chunks + chunk;
        part_ml[part * 2] = ms[gi];
        part_ml[part * 2 + 1] = ls[gi];
      }
    }
  }
}

#define MEMRA_DEFINE_ATTENTION_CHUNK(NAME, KvT)                                                                  \
  extern "C" __global__ void __launch_bounds__(kAttnThreads)                                                     \
      NAME(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads, int32_t kv_heads,             \
           int32_t head_dim, int32_t block_size, const int32_t* positions, const int32_t* seq_index,            \
           const int32_t* block_tables, int32_t max_blocks, float scale, int32_t sliding_window, float softcap, \
           int32_t max_chunks, float* part_o, float* part_ml, const int32_t* rows) {                           \
    attention_chunk(q, k_cache, v_cache, heads, kv_heads, head_dim, block_size, positions, seq_index,           \
                    block_tables, max_blocks, scale, sliding_window, softcap, max_chunks, part_o, part_ml, rows);  \
  }
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk, float)
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk_bf16, __nv_bfloat16)

// grid (entries * heads), kAttnThreads threads. out: [tokens][heads * head_dim].
extern "C" __global__ void __launch_bounds__(kAttnThreads)
    memra_attention_combine(const float* part_o, const float* part_ml, const int32_t* positions, int32_t heads,
                            int32_t head_dim, int32_t sliding_window, int32_t max_chunks, float* out,
                            const int32_t* rows) {
  const int64_t th = blockIdx.x;
  const int64_t t = rows ? rows[th / heads] : th / heads;
  const int h = static_cast<int>(th % heads);
  const int32_t pos = positions[t];
  const int32_t n = pos - first_position(pos, sliding_window) + 1;
  const int chunks = (n + kAttnChunk - 1) / kAttnChunk;
  const float* ml = part_ml + th * max_chunks * 2;
  float m = -INFINITY;
  for (int c = 0; c < chunks; ++c) m = fmaxf(m, ml[2 * c]);
  // Each chunk's weight expf(m_c - m) once per block (not once per thread and dim)
  // when it fits; the same values either way, so the same bits.
  constexpr int kStaged = 256;
  __shared__ float wts[kStaged];
  const bool staged = chunks <= kStaged;
  if (staged) {
    for (int c = threadIdx.x; c < chunks; c += kAttnThreads) wts[c] = expf(ml[2 * c] - m);
    __syncthreads();
  }
  float l = 0.0f;
  for (int c = 0; c < chunks; ++c) l = fmaf(ml[2 * c + 1], staged ? wts[c] : expf(ml[2 * c] - m), l);
  const float inv = 1.0f / l;
  float* o = out + t * heads * head_dim + static_cast<int64_t>(h) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += kAttnThreads) {
    float acc = 0.0f;
    // Unrolled so several chunks' loads are in flight; the fmaf chain keeps chunk order.
#pragma unroll 8
    for (int c = 0; c < chunks; ++c)
      acc = fmaf(part_o[(th * max_chunks + c) * head_dim + i], staged ? wts[c] : expf(ml[2 * c] - m), acc);
    o[i] = acc * inv;
  }
}
