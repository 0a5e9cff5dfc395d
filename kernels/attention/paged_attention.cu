// Attention over the paged KV cache (f32, f16 or bf16) for generated rows (decode, verify),
// split-KV (paged_attention_layout.hpp): a row's visible positions are cut into chunks of
// kDecodeChunk, its chunks into splits of decode_split_chunks; one CTA per (row, kv head,
// split) serves the kv head's whole q-head group (grouped-query attention: each K and V
// row is read once for the group) and walks its chunks in order with an online softmax
// (running max m, sum l of exp(s - m), unnormalised output o, rescaled by exp(m_old - m)
// per chunk). A row of one split writes its output itself; otherwise each split writes
// its (m, l, o) and the split that finishes last (a per (row, kv head) counter, reset by
// it) merges them in split order. Every reduction below has an order fixed by the row's
// visible positions, the head_dim and the group size, so a row's output is bitwise the
// same in a prefill, a decode or a verify step and beside any other sequences.
// `rows` (nullable) lists the token rows to compute (a step whose prompt rows run the
// prefill kernel, prefill_attention_mma.cu): entry i of the launch is token rows[i]
// (i itself when rows is NULL); part_o/part_ml and the counters are indexed by i.
// `fresh_from` (nullable: every row waits) gives per token row the first position the
// step writes for its sequence.
//
// The CTA stages a chunk's K and V rows in shared memory with 16-byte cp.async
// (zero-filled past the row's last position), K and V as two groups so the V loads
// overlap the score phase, and with two stages the next chunk's rows while it computes
// this one; every element type then runs one code, each element converted exactly to
// f32, so an f16 or bf16 cache's rows are bitwise the f32 kernel's on a cache holding the
// same (representable) values (memra-kernel-check proves it).
// Without nvcc (tests/cuda/decode_attention_emulator.hpp, which includes this file on the
// host) the CUDA types and the cp.async / shared-memory / atomic primitives come from the emulator.
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include <stdint.h>

#include "kernels/attention/paged_attention_layout.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"

namespace {
constexpr int kChunk = memra::attn::kDecodeChunk;
constexpr int kThreads = memra::attn::kDecodeThreads;
constexpr int kWarpRows = kChunk / (kThreads / 32);  // 16 positions of the chunk per warp
constexpr int kPassHeads = 4;  // score phase: 8 positions x 4 q heads = 32 partial dots per lane
constexpr int kPvHeads = 8;    // output phase: q heads per pass (accumulators per thread)

__device__ __forceinline__ int32_t first_position(int32_t pos, int32_t window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

__device__ __forceinline__ int64_t slot_offset(const int32_t* table, int32_t position, int32_t block_size,
                                               int64_t row_width) {
  const int64_t block = table[position / block_size];
  return (block * block_size + position % block_size) * row_width;
}

#if defined(__CUDACC__)
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// Elements as exact floats: 4 consecutive ones (f32: one 16-byte load, bf16: one 8-byte
// load; lanes reading consecutive groups touch consecutive banks), or one.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                     __uint_as_float(u.y & 0xffff0000u));
}
__device__ __forceinline__ float4 load4(const __half* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const __half* h = reinterpret_cast<const __half*>(&u);
  return make_float4(__half2float(h[0]), __half2float(h[1]), __half2float(h[2]), __half2float(h[3]));
}
__device__ __forceinline__ float load1(const float* p) { return *p; }
__device__ __forceinline__ float load1(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load1(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// Rows begin .. end-1 of the chunk (row j at src + row_off[j]) into dst [kChunk][head_dim],
// 16-byte pieces; rows at or past `len` are zero-filled (no global read).
template <class KvT>
__device__ __forceinline__ void stage_rows(KvT* dst, const KvT* src, const int64_t* row_off, int head_dim, int begin,
                                           int end, int len) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(KvT));
  const int per_row = head_dim / kPer;
  for (int idx = begin * per_row + threadIdx.x; idx < end * per_row; idx += kThreads) {
    const int j = idx / per_row, c = idx - j * per_row;
    cp_async16(dst + j * head_dim + c * kPer, src + row_off[j] + c * kPer, j < len ? 16 : 0);
  }
}

// Sum over the warp of 32 values per lane, lane l ending with the sum of entry l (a
// reduce-scatter: 31 shuffles instead of 32 butterflies of 5). The adds form a fixed tree.
template <int O>
__device__ __forceinline__ void reduce_scatter_step(float (&v)[32], int lane) {
  const bool upper = (lane & O) != 0;
#pragma unroll
  for (int k = 0; k < O; ++k) {
    const float send = upper ? v[k] : v[k + O];
    const float keep = upper ? v[k + O] : v[k];
    v[k] = keep + __shfl_xor_sync(0xffffffffu, send, O);
  }
}
__device__ __forceinline__ float reduce_scatter32(float (&v)[32], int lane) {
  reduce_scatter_step<16>(v, lane);
  reduce_scatter_step<8>(v, lane);
  reduce_scatter_step<4>(v, lane);
  reduce_scatter_step<2>(v, lane);
  reduce_scatter_step<1>(v, lane);
  return v[0];
}

// Scores of q heads g0 .. g0+3 over the chunk: warp w takes positions 16w .. 16w+15 in
// two rounds of 8; lane l holds q's 4-dim groups l, l+32, ... (S of them) and computes,
// per position and head, a partial dot over them (an fmaf chain: groups in order, dims in
// order); the 32 partials per (position, head) then go through reduce_scatter32. Lane l
// ends with position l / 4, head l % 4 of the round. Positions past `len` score -inf.
template <int S, class KvT>
__device__ __forceinline__ void score_pass(const float* qg, const KvT* kt, float* scores, int g0, int gn, int head_dim,
                                           int len, float scale, float softcap, bool next_in_flight) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int groups4 = head_dim / 4;
  float4 qv[kPassHeads][S];
#pragma unroll
  for (int gi = 0; gi < kPassHeads; ++gi)
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int c = lane + 32 * s;
      qv[gi][s] = (gi < gn && c < groups4) ? *reinterpret_cast<const float4*>(qg + (g0 + gi) * head_dim + 4 * c)
                                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  if (g0 == 0) {
    // This thread's K pieces (and the stable V rows; the fresh V rows and the next
    // chunk's two groups may be in flight), then everyone's.
    if (next_in_flight) cp_async_wait<3>(); else cp_async_wait<1>();
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kWarpRows / 8; ++r) {
    const int jb = warp * kWarpRows + r * 8;
    const int j = jb + (lane >> 2), gi = lane & 3;
    float s = -INFINITY;
    if (jb < len) {  // warp-uniform
      float v[32];
#pragma unroll
      for (int p = 0; p < 8; ++p) {
        const KvT* krow = kt + (jb + p) * head_dim;
        float acc[kPassHeads];
#pragma unroll
        for (int h = 0; h < kPassHeads; ++h) acc[h] = 0.0f;
#pragma unroll
        for (int si = 0; si < S; ++si) {
          const int c = lane + 32 * si;
          if (c < groups4) {
            const float4 k4 = load4(krow + 4 * c);
#pragma unroll
            for (int h = 0; h < kPassHeads; ++h) {
              acc[h] = fmaf(qv[h][si].x, k4.x, acc[h]);
              acc[h] = fmaf(qv[h][si].y, k4.y, acc[h]);
              acc[h] = fmaf(qv[h][si].z, k4.z, acc[h]);
              acc[h] = fmaf(qv[h][si].w, k4.w, acc[h]);
            }
          }
        }
#pragma unroll
        for (int h = 0; h < kPassHeads; ++h) v[p * kPassHeads + h] = acc[h];
      }
      const float d = reduce_scatter32(v, lane);
      if (j < len) {
        s = d * scale;
        if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
      }
    }
    if (gi < gn) scores[(g0 + gi) * kChunk + j] = s;
  }
}

// The chunk's row offsets: threads `base` .. base + 63 fill row_off[j] for the chunk's
// rows j < staged (rows past the last position repeat it; they are zero-filled anyway).
__device__ __forceinline__ void chunk_offsets(int64_t* row_off, const int32_t* table, int32_t j0, int len, int staged,
                                              int32_t block_size, int64_t row_width, int64_t head_off, int base) {
  const int j = static_cast<int>(threadIdx.x) - base;
  if (j >= 0 && j < staged) row_off[j] = slot_offset(table, j0 + min(j, len - 1), block_size, row_width) + head_off;
}

// part_o: [entries*heads][max_splits][head_dim]; part_ml: [entries*heads][max_splits][2];
// counters: [entries*kv_heads], zero between launches. Shared memory:
// paged_attention_layout.hpp (decode_attention_smem_bytes).
template <class KvT>
__device__ __forceinline__ void attention_split(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads,
                                                int32_t kv_heads, int32_t head_dim, int32_t block_size,
                                                const int32_t* positions, const int32_t* seq_index,
                                                const int32_t* block_tables, int32_t max_blocks, float scale,
                                                int32_t sliding_window, float softcap, int32_t max_splits, float* part_o,
                                                float* part_ml, const int32_t* rows, const int32_t* fresh_from,
                                                int32_t stages, int32_t v_separate, int32_t* counters, float* out) {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  __shared__ int is_last;
  const int group = heads / kv_heads, slots = memra::attn::decode_attention_sum_slots(group);
  int64_t* row_off = reinterpret_cast<int64_t*>(smem_raw);  // [2][kChunk]
  float* scores = reinterpret_cast<float*>(row_off + 2 * kChunk);  // [group][kChunk]
  float* run_m = scores + group * kChunk;                          // [slots] each
  float* run_l = run_m + slots;
  float* alpha = run_l + slots;
  float* o_acc = alpha + slots;                                    // [group][head_dim]
  KvT* tiles = reinterpret_cast<KvT*>(o_acc + group * head_dim);   // [stages][K (, V)][kChunk][head_dim]
  const int64_t tile = static_cast<int64_t>(kChunk) * head_dim;
  const int64_t stage_elems = v_separate ? 2 * tile : tile;
  const int64_t tk = blockIdx.x;
  const int64_t i_entry = tk / kv_heads;
  const int64_t t = rows ? rows[i_entry] : i_entry;
  const int kvh = static_cast<int>(tk % kv_heads);
  const int h0 = kvh * group;  // the group's first q head
  const int32_t pos = positions[t];
  const int32_t first = first_position(pos, sliding_window);
  const int32_t n = pos - first + 1;
  const int chunks = memra::attn::decode_chunks(n), per = memra::attn::decode_split_chunks(chunks);
  const int splits = (chunks + per - 1) / per;
  const int split = blockIdx.y;
  if (split >= splits) return;
  const int c_begin = split * per, c_end = min(chunks, c_begin + per);
  const int64_t row_width = static_cast<int64_t>(kv_heads) * head_dim, head_off = static_cast<int64_t>(kvh) * head_dim;
  const int32_t* table = block_tables + static_cast<int64_t>(seq_index[t]) * max_blocks;
  const float* qg = q + (t * heads + h0) * static_cast<int64_t>(head_dim);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  auto chunk_len = [&](int c) { return min(kChunk, n - c * kChunk); };
  auto chunk_staged = [&](int c) { return min(kChunk, (chunk_len(c) + 7) & ~7); };  // rows the phases read (8-row rounds)
  // Stage K (and V when separate) rows [begin, end) of chunk c into stage s: two groups.
  auto stage_chunk = [&](int c, int s, int begin, int end) {
    KvT* kt = tiles + s * stage_elems;
    stage_rows(kt, k_cache, row_off + s * kChunk, head_dim, begin, end, chunk_len(c));
    cp_async_commit();
    if (v_separate) stage_rows(kt + tile, v_cache, row_off + s * kChunk, head_dim, begin, end, chunk_len(c));
    cp_async_commit();  // (an empty group when V waits for the K rows' space)
  };
  const bool two = stages > 1;
  chunk_offsets(row_off, table, first + c_begin * kChunk, chunk_len(c_begin), chunk_staged(c_begin), block_size, row_width,
                head_off, 0);
  if (two && c_begin + 1 < c_end)
    chunk_offsets(row_off + kChunk, table, first + (c_begin + 1) * kChunk, chunk_len(c_begin + 1),
                  chunk_staged(c_begin + 1), block_size, row_width, head_off, kChunk);
  for (int i = tid; i < group * head_dim; i += kThreads) o_acc[i] = 0.0f;
  if (tid < group) run_m[tid] = -INFINITY, run_l[tid] = 0.0f;
  __syncthreads();
  // PDL (kernels/common/pdl.cuh): the positions, tables and row lists are the step's
  // uploads and the K/V rows before fresh_from[t] (the first position any row of this
  // step writes for t's sequence) were written by earlier steps, so the first chunk's
  // such rows stream in while the previous kernel (RoPE + KV write) still runs; q and
  // this step's K/V rows only after the wait. Which row lands when never changes what is computed.
  const int32_t j_begin = first + c_begin * kChunk;
  const int stable = fresh_from ? max(0, min(chunk_len(c_begin), fresh_from[t] - j_begin)) : 0;
  stage_chunk(c_begin, 0, 0, stable);
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  stage_chunk(c_begin, 0, stable, chunk_staged(c_begin));
  if (two && c_begin + 1 < c_end) stage_chunk(c_begin + 1, 1, 0, chunk_staged(c_begin + 1));

  const int groups4 = head_dim / 4;
  for (int c = c_begin; c < c_end; ++c) {
    const int s = two ? (c - c_begin) & 1 : 0;
    const bool next_in_flight = two && c + 1 < c_end;  // its two groups were committed after this chunk's
    const int len = chunk_len(c), staged = chunk_staged(c);
    KvT* kt = tiles + s * stage_elems;
    KvT* vt = v_separate ? kt + tile : kt;
    for (int g0 = 0; g0 < group; g0 += kPassHeads) {
      const int gn = min(kPassHeads, group - g0);
      if (groups4 <= 32)
        score_pass<1>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap, next_in_flight);
      else if (groups4 <= 64)
        score_pass<2>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap, next_in_flight);
      else
        score_pass<4>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap, next_in_flight);
    }
    __syncthreads();  // scores published, K rows read
    if (!v_separate) {
      stage_rows(vt, v_cache, row_off + s * kChunk, head_dim, 0, staged, len);
      cp_async_commit();
    }

    // Online softmax per q head, warp w taking heads w, w+4, ...: lane l holds positions
    // l and l+32; the chunk's max and sum of exp(s - m) by warp butterflies (fixed order),
    // m the running max; the earlier chunks' sum and output are rescaled by exp(m_old - m).
    for (int g = warp; g < group; g += kThreads / 32) {
      float* sc = scores + g * kChunk;
      const float a = sc[lane], b = sc[lane + 32];
      const float m_old = run_m[g];
      const float m = fmaxf(m_old, memra::cuda::warp_max(fmaxf(a, b)));
      const float pa = expf(a - m), pb = expf(b - m);
      const float l = memra::cuda::warp_sum(pa + pb);
      sc[lane] = pa;
      sc[lane + 32] = pb;
      if (lane == 0) {
        const float r = expf(m_old - m);  // 0 for the first chunk (m_old = -inf)
        alpha[g] = r;
        run_l[g] = fmaf(run_l[g], r, l);
        run_m[g] = m;
      }
    }
    if (next_in_flight) cp_async_wait<2>(); else cp_async_wait<0>();
    __syncthreads();  // V rows and the weights published

    // Output: thread (dim d, head slot) runs, per q head, one fmaf chain over the chunk's
    // positions in order (weights past `len` are 0 and so are the zero-filled V rows),
    // then o = o_old * alpha + chain. With head_dim < 128 the block's threads split the
    // heads in slots.
    const int dcount = min(head_dim, kThreads), hslots = kThreads / dcount;
    const int d0 = tid % dcount, slot = tid / dcount;
    if (slot < hslots)
      for (int d = d0; d < head_dim; d += dcount) {
        for (int gb = slot; gb < group; gb += hslots * kPvHeads) {
          float o[kPvHeads];
#pragma unroll
          for (int k = 0; k < kPvHeads; ++k) o[k] = 0.0f;
          for (int j = 0; j < len; j += 4) {
            const float v0 = load1(vt + (j + 0) * head_dim + d), v1 = load1(vt + (j + 1) * head_dim + d);
            const float v2 = load1(vt + (j + 2) * head_dim + d), v3 = load1(vt + (j + 3) * head_dim + d);
#pragma unroll
            for (int k = 0; k < kPvHeads; ++k) {
              const int g = gb + k * hslots;
              if (g < group) {
                const float4 p = *reinterpret_cast<const float4*>(scores + g * kChunk + j);
                o[k] = fmaf(p.x, v0, o[k]);
                o[k] = fmaf(p.y, v1, o[k]);
                o[k] = fmaf(p.z, v2, o[k]);
                o[k] = fmaf(p.w, v3, o[k]);
              }
            }
          }
#pragma unroll
          for (int k = 0; k < kPvHeads; ++k) {
            const int g = gb + k * hslots;
            if (g < group) o_acc[g * head_dim + d] = fmaf(o_acc[g * head_dim + d], alpha[g], o[k]);
          }
        }
      }
    __syncthreads();  // this stage's rows, row offsets, scores and alpha are free again
    const int c_next = c + (two ? 2 : 1);
    if (c_next < c_end) {
      chunk_offsets(row_off + s * kChunk, table, first + c_next * kChunk, chunk_len(c_next), chunk_staged(c_next),
                    block_size, row_width, head_off, 0);
      __syncthreads();
      stage_chunk(c_next, s, 0, chunk_staged(c_next));
    }
  }

  const int64_t head_base = i_entry * heads + h0;  // partials' index of the group's first q head
  if (splits == 1) {
    for (int i = tid; i < group * head_dim; i += kThreads)
      out[(t * heads + h0) * static_cast<int64_t>(head_dim) + i] = o_acc[i] * (1.0f / run_l[i / head_dim]);
    return;
  }
  for (int i = tid; i < group * head_dim; i += kThreads) {
    const int g = i / head_dim, d = i - g * head_dim;
    part_o[((head_base + g) * max_splits + split) * head_dim + d] = o_acc[i];
  }
  if (tid < group) {
    part_ml[((head_base + tid) * max_splits + split) * 2] = run_m[tid];
    part_ml[((head_base + tid) * max_splits + split) * 2 + 1] = run_l[tid];
  }
  // The last split of (row, kv head) to finish merges: each thread's writes are made
  // visible device-wide before one thread counts the split in.
  __threadfence();
  __syncthreads();
  int32_t* counter = counters + i_entry * kv_heads + kvh;
  if (tid == 0) is_last = atomicAdd(counter, 1) == splits - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();

  // Merge, per q head: m = max of the splits' m; w_s = exp(m_s - m) (staged in the free
  // K/V buffers when they fit); l = sum l_s w_s (lane-strided fmaf chains, then the warp
  // butterfly); output (head, dim) = fmaf chain over the splits in order of o_s w_s, times 1/l.
  float* wts = reinterpret_cast<float*>(tiles);
  const bool staged_w = static_cast<int64_t>(group) * splits * 4 <= stages * stage_elems * static_cast<int64_t>(sizeof(KvT));
  for (int g = warp; g < group; g += kThreads / 32) {
    const float* ml = part_ml + (head_base + g) * max_splits * 2;
    float m = -INFINITY;
    for (int i = lane; i < splits; i += 32) m = fmaxf(m, __ldcg(ml + 2 * i));
    m = memra::cuda::warp_max(m);
    float l = 0.0f;
    for (int i = lane; i < splits; i += 32) {
      const float w = expf(__ldcg(ml + 2 * i) - m);
      if (staged_w) wts[g * splits + i] = w;
      l = fmaf(__ldcg(ml + 2 * i + 1), w, l);
    }
    l = memra::cuda::warp_sum(l);
    if (lane == 0) run_m[g] = m, run_l[g] = l;
  }
  __syncthreads();
  for (int i = tid; i < group * head_dim; i += kThreads) {
    const int g = i / head_dim, d = i - g * head_dim;
    const float* po = part_o + (head_base + g) * max_splits * head_dim + d;
    const float* ml = part_ml + (head_base + g) * max_splits * 2;
    const float m = run_m[g];
    float acc = 0.0f;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp) {
      const float w = staged_w ? wts[g * splits + sp] : expf(__ldcg(ml + 2 * sp) - m);
      acc = fmaf(__ldcg(po + static_cast<int64_t>(sp) * head_dim), w, acc);
    }
    out[(t * heads + h0) * static_cast<int64_t>(head_dim) + i] = acc * (1.0f / run_l[g]);
  }
  if (tid == 0) *counter = 0;  // every split of this row has counted in: ready for the next launch
}
}  // namespace

#define MEMRA_DEFINE_ATTENTION_SPLIT(NAME, KvT)                                                                      \
  extern "C" __global__ void __launch_bounds__(kThreads, 4)                                                          \
      NAME(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads, int32_t kv_heads,                 \
           int32_t head_dim, int32_t block_size, const int32_t* positions, const int32_t* seq_index,                \
           const int32_t* block_tables, int32_t max_blocks, float scale, int32_t sliding_window, float softcap,     \
           int32_t max_splits, float* part_o, float* part_ml, const int32_t* rows, const int32_t* fresh_from,       \
           int32_t stages, int32_t v_separate, int32_t* counters, float* out) {                                     \
    attention_split(q, k_cache, v_cache, heads, kv_heads, head_dim, block_size, positions, seq_index, block_tables, \
                    max_blocks, scale, sliding_window, softcap, max_splits, part_o, part_ml, rows, fresh_from,      \
                    stages, v_separate, counters, out);                                                              \
  }
MEMRA_DEFINE_ATTENTION_SPLIT(memra_attention_split, float)
MEMRA_DEFINE_ATTENTION_SPLIT(memra_attention_split_f16, __half)
MEMRA_DEFINE_ATTENTION_SPLIT(memra_attention_split_bf16, __nv_bfloat16)
