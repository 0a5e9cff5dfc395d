// Attention over the paged KV cache (f32, f16 or bf16) for generated rows (decode, verify),
// split over fixed chunks of kDecodeChunk positions (paged_attention_layout.hpp).
// Pass 1 (memra_attention_chunk{,_f16,_bf16}): one block per (row, kv head, chunk) serves the
// kv head's whole q-head group (grouped-query attention: each K and V row of the chunk
// is read once for the group) and writes per q head the chunk's max score m, the sum l
// of exp(s - m) and the unnormalised output o. Pass 2 (memra_attention_combine): one
// block per (row, q head) merges its chunks. Every reduction below has an order fixed by
// the chunk, the head_dim and the group size, and the chunking depends only on the row's
// own position (and the sliding window), so a row's output is bitwise the same in a
// prefill, a decode or a verify step and beside any other sequences.
// `rows` (nullable) lists the token rows to compute (a step whose prompt rows run the
// prefill kernel, prefill_attention_mma.cu): entry i of the launch is token rows[i]
// (i itself when rows is NULL); part_o/part_ml are indexed by i. `fresh_from` (nullable:
// every row waits) gives per token row the first position the step writes for its sequence.
// `out` (nullable) when every row of the launch has one chunk (max_chunks == 1): pass 1
// then writes the output itself with pass 2's arithmetic for one chunk (bitwise the
// same) and pass 2 is not launched.
// `xq`/`xm` (nullable; only with `rows` NULL and head_dim % 32 == 0): whichever kernel
// writes `out` also writes it as int8x32 rows (kernels/common/quantize_q8.cuh, what
// memra_quantize_act_q8_rows would compute from `out`) for the next integer-activation
// matmul (the o projection), which then needs no quantisation launch. `fp8_plane` /
// `fp8_back` (nullable; pass 1 writing `out` only, `rows` NULL, group * head_dim % 128
// == 0): the same for fp8 weights, the fp8 GEMV's prepared rows (kernels/matmul/
// fp8_act.cuh, what memra_prepare_act_fp8_rows would compute from `out`).
//
// The block stages the chunk's K and V rows in shared memory with 16-byte cp.async
// (zero-filled past the row's last position), K and V as two groups so the V loads
// overlap the score phase; every element type then runs one code, each element converted
// exactly to f32, so an f16 or bf16 cache's rows are bitwise the f32 kernel's on a cache
// holding the same (representable) values (memra-kernel-check proves it).
// An fp8 (e4m3fn) cache (memra_attention_chunk_fp8; its blocks hold the codes, then one
// f32 scale per position and kv head: attention_ref.hpp) stages the raw codes and their
// rows' scales, converts the codes exactly to f16 in shared memory and runs the f16
// tensor-core code, a K row's scale multiplying its scores and a V row's scale its
// weights after the softmax sums (so o = sum_j p_j d_j v_j, l = sum_j p_j).
// Without nvcc (tests/cuda/decode_attention_emulator.hpp, which includes this file on the
// host) the CUDA types and the cp.async / shared-memory primitives come from the emulator.
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#include <stdint.h>

#include "kernels/attention/kv_fp8_layout.hpp"
#include "kernels/attention/paged_attention_layout.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/quantize_q8.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/matmul/fp8_act.cuh"

namespace {
constexpr int kChunk = memra::attn::kDecodeChunk;
constexpr int kThreads = memra::attn::kDecodeThreads;
constexpr int kWarpRows = kChunk / (kThreads / 32);  // 16 positions of the chunk per warp
constexpr int kPassHeads = 4;  // score phase: 8 positions x 4 q heads = 32 partial dots per lane
constexpr int kPvHeads = 8;    // output phase: q heads per pass (accumulators per thread)

// An fp8 cache element (its bits); the tiles it is converted into are f16.
struct Fp8E4m3 {
  uint8_t bits;
};
template <class KvT>
struct TileOf {
  using type = KvT;
};
template <>
struct TileOf<Fp8E4m3> {
  using type = __half;
};

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

// f32 cache elements (the CUDA-core kernel): 4 consecutive ones (one 16-byte load), or one.
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float load1(const float* p) { return *p; }

// Rows begin .. end-1 of the chunk (row j at src + row_off[j]) into dst [kChunk][stride],
// 16-byte pieces; rows at or past `len` are zero-filled (no global read).
template <class KvT>
__device__ __forceinline__ void stage_rows(KvT* dst, const KvT* src, const int64_t* row_off, int head_dim, int stride,
                                           int begin, int end, int len) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(KvT));
  const int per_row = head_dim / kPer;
  for (int idx = begin * per_row + threadIdx.x; idx < end * per_row; idx += kThreads) {
    const int j = idx / per_row, c = idx - j * per_row;
    cp_async16(dst + j * stride + c * kPer, src + row_off[j] + c * kPer, j < len ? 16 : 0);
  }
}

// ---- Tensor-core primitives (the 16-bit caches' kernels) ----
// mma.m16n8k16 (f32 accumulate) over f16 or bf16 operands, ldmatrix .x4 (.trans) of
// four 8x8 16-bit matrices; the emulator (tests/cuda) builds them from the PTX ISA's
// fragment layouts. An f32 operand x enters as hi = T(x) and lo = T(x - hi) (two mma).
#if defined(__CUDACC__)
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t to16(float x, __nv_bfloat16) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ float from16(uint32_t h, __nv_bfloat16) { return __uint_as_float(h << 16); }
__device__ __forceinline__ uint32_t to16(float x, __half) { return __half_as_ushort(__float2half_rn(x)); }
__device__ __forceinline__ float from16(uint32_t h, __half) { return __half2float(__ushort_as_half(static_cast<unsigned short>(h))); }
// Two e4m3 codes (the low 16 bits, first in the low byte) as two f16 bits (exact).
__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}
#endif
// Rows 0 .. rows-1 of a raw fp8 tile [kChunk][head_dim] into the f16 tile [kChunk][stride].
__device__ __forceinline__ void fp8_rows_to_tile(const uint8_t* raw, __half* tile, int head_dim, int stride, int rows) {
  const int per_row = head_dim / 8;
  for (int idx = threadIdx.x; idx < rows * per_row; idx += kThreads) {
    const int j = idx / per_row, c = idx - j * per_row;
    const uint2 w = *reinterpret_cast<const uint2*>(raw + j * head_dim + 8 * c);
    *reinterpret_cast<uint4*>(tile + j * stride + 8 * c) =
        make_uint4(fp8x2_to_f16x2(w.x), fp8x2_to_f16x2(w.x >> 16), fp8x2_to_f16x2(w.y), fp8x2_to_f16x2(w.y >> 16));
  }
}
template <class T>
__device__ __forceinline__ void split2(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const uint32_t h0 = to16(x0, T{}), h1 = to16(x1, T{});
  hi = h0 | (h1 << 16);
  lo = to16(x0 - from16(h0, T{}), T{}) | (to16(x1 - from16(h1, T{}), T{}) << 16);
}
// The A fragment (16 rows x 16 k) of rows r0.. of a [rows][ld] f32 matrix at column k0 as
// hi and lo words: rows at or past `rows` and columns at or past `cols` are zero.
template <class T>
__device__ __forceinline__ void a_frag(const float* m, int ld, int r0, int rows, int k0, int cols, uint32_t (&hi)[4],
                                       uint32_t (&lo)[4]) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, c = k0 + 2 * (lane & 3);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = r0 + gid + 8 * (i & 1), cc = c + 8 * (i >> 1);
    float x0 = 0.0f, x1 = 0.0f;
    if (r < rows && cc < cols) {
      x0 = m[static_cast<int64_t>(r) * ld + cc];
      x1 = m[static_cast<int64_t>(r) * ld + cc + 1];
    }
    split2<T>(x0, x1, hi[i], lo[i]);
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
                                           int len, float scale, float softcap) {
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
    cp_async_wait<1>();  // this thread's K pieces (and the stable V rows; the fresh V rows may be in flight)
    __syncthreads();     // everyone's
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

// Scores on the tensor cores (16-bit caches): warp w takes positions 16w .. 16w+15 (two
// n-tiles of 8) for 16 q heads at a time (an m-tile; heads past the group are zero rows):
// per 16 dims of head_dim in order, q_hi.K then q_lo.K into the f32 accumulators (K exact
// as stored). Then x scale, softcap; positions past `len` score -inf. fp8 (kFp8): the
// staged codes (kraw) are first converted into kt, and a score is (acc * kscale[j]) * scale.
template <class KvT, bool kFp8 = false>
__device__ __forceinline__ void mma_scores(const float* qg, KvT* kt, float* scores, int group, int head_dim, int stride,
                                           int len, int staged, float scale, float softcap, const uint8_t* kraw = nullptr,
                                           const float* kscale = nullptr) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  cp_async_wait<1>();  // this thread's K pieces (and the stable V rows; the fresh V rows may be in flight)
  __syncthreads();     // everyone's
  if constexpr (kFp8) {
    fp8_rows_to_tile(kraw, kt, head_dim, stride, staged);
    __syncthreads();
  }
  const int jw = warp * 16;
  for (int m0 = 0; m0 < group; m0 += 16) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if (jw < staged) {
      const int mi = lane >> 3, r = lane & 7;
      const KvT* krow = kt + (jw + (mi >> 1) * 8 + r) * stride + (mi & 1) * 8;
      for (int k0 = 0; k0 < head_dim; k0 += 16) {
        uint32_t hi[4], lo[4], b[4];
        a_frag<KvT>(qg, head_dim, m0, group, k0, head_dim, hi, lo);
        ldsm_x4(b, krow + k0);
        mma16816(acc[0], hi, b[0], b[1], KvT{});
        mma16816(acc[0], lo, b[0], b[1], KvT{});
        mma16816(acc[1], hi, b[2], b[3], KvT{});
        mma16816(acc[1], lo, b[2], b[3], KvT{});
      }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // accumulator (n-tile i / 4, row half (i / 2) % 2, column i % 2)
      const int g = m0 + gid + 8 * ((i >> 1) & 1), j = jw + 8 * (i >> 2) + 2 * tig + (i & 1);
      if (g >= group) continue;
      float sc = -INFINITY;
      if (j < len) {
        float a = acc[i >> 2][i & 3];
        if constexpr (kFp8) a = a * kscale[j];
        sc = a * scale;
        if (softcap > 0.0f) sc = softcap * tanhf(sc / softcap);
      }
      scores[g * kChunk + j] = sc;
    }
  }
}

// P.V on the tensor cores: the head_dim's n-tiles of 8 dims go to the warps in pairs
// (warp w: tiles 2w, 2w+1, then 2w+8, ...), 16 q heads at a time; per 16 positions in
// order, P_hi.V then P_lo.V (V exact as stored; positions past `len` have P = 0 and
// zero-filled rows). The chunk's output (unnormalised) goes to p_row [head][pitch], or
// with one chunk (o_row) o * (1 / l) as the merge would write it: (o + 0) * (1 / l).
template <class KvT>
__device__ __forceinline__ void mma_output(const float* scores, const float* sums, const KvT* vt, int group,
                                           int head_dim, int stride, int staged, float* o_row, float* p_row,
                                           int64_t pitch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, tig = lane & 3;
  const int ntiles = head_dim / 8, mi = lane >> 3, r = lane & 7;
  for (int m0 = 0; m0 < group; m0 += 16)
    for (int n0 = 2 * warp; n0 < ntiles; n0 += 8) {
      float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      const KvT* vcol = vt + ((mi & 1) * 8 + r) * stride + (n0 + (mi >> 1)) * 8;
      for (int k0 = 0; k0 < staged; k0 += 16) {
        uint32_t hi[4], lo[4], b[4];
        a_frag<KvT>(scores, kChunk, m0, group, k0, kChunk, hi, lo);
        ldsm_x4_trans(b, vcol + k0 * stride);
        mma16816(acc[0], hi, b[0], b[1], KvT{});
        mma16816(acc[0], lo, b[0], b[1], KvT{});
        mma16816(acc[1], hi, b[2], b[3], KvT{});
        mma16816(acc[1], lo, b[2], b[3], KvT{});
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int g = m0 + gid + 8 * ((i >> 1) & 1), d = 8 * (n0 + (i >> 2)) + 2 * tig + (i & 1);
        if (g >= group || d >= head_dim) continue;
        const float o = acc[i >> 2][i & 3];
        if (o_row)
          o_row[static_cast<int64_t>(g) * head_dim + d] = (o + 0.0f) * (1.0f / sums[g]);
        else
          p_row[g * pitch + d] = o;
      }
    }
}

// part_o: [entries*heads][max_chunks][head_dim]; part_ml: [entries*heads][max_chunks][2].
// Shared memory: paged_attention_layout.hpp (decode_attention_smem_bytes).
template <class KvT>
__device__ __forceinline__ void attention_chunk(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads,
                                                int32_t kv_heads, int32_t head_dim, int32_t block_size,
                                                const int32_t* positions, const int32_t* seq_index,
                                                const int32_t* block_tables, int32_t max_blocks, float scale,
                                                int32_t sliding_window, float softcap, int32_t max_chunks, float* part_o,
                                                float* part_ml, const int32_t* rows, const int32_t* fresh_from,
                                                int32_t v_separate, float* out, int8_t* xq, float2* xm,
                                                uint2* fp8_plane, float* fp8_back) {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  // 16-bit caches take the tensor cores for the scores and P.V (their rows padded by 8
  // elements so the ldmatrix rows fall in distinct banks), and fp8 ones through f16
  // tiles; f32 caches the CUDA cores.
  using TileT = typename TileOf<KvT>::type;
  constexpr bool kFp8 = sizeof(KvT) == 1;
  constexpr bool kMma = sizeof(TileT) == 2;
  const int group = heads / kv_heads;
  const int stride = memra::attn::decode_tile_stride(head_dim, static_cast<int>(sizeof(TileT)));
  int64_t* row_off = reinterpret_cast<int64_t*>(smem_raw);       // [kChunk]
  float* scores = reinterpret_cast<float*>(row_off + kChunk);     // [group][kChunk]
  float* sums = scores + group * kChunk;                          // [group] (padded)
  TileT* kt = reinterpret_cast<TileT*>(sums + ((group + 3) & ~3));  // [kChunk][stride] (decode_attention_sum_slots)
  TileT* vt = v_separate ? kt + kChunk * stride : kt;               // [kChunk][stride]
  // fp8 only: the rows' scale offsets and scales, then the raw codes [kChunk][head_dim].
  int64_t* sc_off = reinterpret_cast<int64_t*>(vt + kChunk * stride);
  float* kscale = reinterpret_cast<float*>(sc_off + kChunk);
  float* vscale = kscale + kChunk;
  uint8_t* kraw = reinterpret_cast<uint8_t*>(vscale + kChunk);
  uint8_t* vraw = v_separate ? kraw + kChunk * head_dim : kraw;
  // Where the cp.async copies land: the tiles themselves, or fp8's raw rows.
  KvT* k_stage = kFp8 ? reinterpret_cast<KvT*>(kraw) : reinterpret_cast<KvT*>(kt);
  KvT* v_stage = kFp8 ? reinterpret_cast<KvT*>(vraw) : reinterpret_cast<KvT*>(vt);
  const int stage_stride = kFp8 ? head_dim : stride;
  const int64_t tk = blockIdx.x;
  const int64_t i_entry = tk / kv_heads;
  const int64_t t = rows ? rows[i_entry] : i_entry;
  const int kvh = static_cast<int>(tk % kv_heads);
  const int h0 = kvh * group;  // the group's first q head
  const int32_t pos = positions[t];
  const int32_t first = first_position(pos, sliding_window);
  const int32_t n = pos - first + 1;
  const int chunk = blockIdx.y;
  if (static_cast<int64_t>(chunk) * kChunk >= n) return;
  const int32_t j0 = first + chunk * kChunk;
  const int len = min(kChunk, n - chunk * kChunk);
  // Rows the phases read: 8-row score rounds, 16-position mma steps.
  const int staged = min(kChunk, kMma ? (len + 15) & ~15 : (len + 7) & ~7);
  const int64_t row_width = static_cast<int64_t>(kv_heads) * head_dim;
  const int32_t* table = block_tables + static_cast<int64_t>(seq_index[t]) * max_blocks;
  const float* qg = q + (t * heads + h0) * static_cast<int64_t>(head_dim);
  const int tid = threadIdx.x;
  if (tid < staged) {
    const int32_t p = j0 + min(tid, len - 1);
    if constexpr (kFp8) {  // kv_fp8_layout.hpp
      const memra::attn::Fp8KvSlot slot =
          memra::attn::fp8_kv_slot(table[p / block_size], p % block_size, kvh, block_size, kv_heads, head_dim);
      row_off[tid] = slot.codes;
      sc_off[tid] = slot.scale;
    } else {
      row_off[tid] = slot_offset(table, p, block_size, row_width) + static_cast<int64_t>(kvh) * head_dim;
    }
  }
  if (kMma && tid < kChunk) {  // the row pads, read (as 0) when head_dim % 16 == 8
    const int j = tid;
    *reinterpret_cast<uint4*>(kt + j * stride + head_dim) = make_uint4(0u, 0u, 0u, 0u);
    if (v_separate) *reinterpret_cast<uint4*>(vt + j * stride + head_dim) = make_uint4(0u, 0u, 0u, 0u);
  }
  __syncthreads();
  // PDL (kernels/common/pdl.cuh): the positions, tables and row lists are the step's
  // uploads and the K/V rows before fresh_from[t] (the first position any row of this
  // step writes for t's sequence) were written by earlier steps, so those rows stream in
  // while the previous kernel (RoPE + KV write) still runs; q and this step's K/V rows
  // only after the wait. Which row lands when never changes what is computed.
  const int stable = fresh_from ? max(0, min(len, fresh_from[t] - j0)) : 0;
  stage_rows(k_stage, k_cache, row_off, head_dim, stage_stride, 0, stable, len);
  cp_async_commit();
  if (v_separate) stage_rows(v_stage, v_cache, row_off, head_dim, stage_stride, 0, stable, len);
  cp_async_commit();
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  stage_rows(k_stage, k_cache, row_off, head_dim, stage_stride, stable, staged, len);
  cp_async_commit();
  if (v_separate) stage_rows(v_stage, v_cache, row_off, head_dim, stage_stride, stable, staged, len);
  cp_async_commit();  // (empty groups when V waits for the K rows' space)
  if constexpr (kFp8) {  // the rows' scales (this step's rows are written by now)
    if (tid < kChunk) {
      const bool in = tid < len;
      kscale[tid] = in ? *reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(k_cache) + sc_off[tid]) : 0.0f;
      vscale[tid] = in ? *reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(v_cache) + sc_off[tid]) : 0.0f;
    }
  }

  const int lane = tid & 31, warp = tid >> 5;
  if constexpr (kMma) {
    mma_scores<TileT, kFp8>(qg, kt, scores, group, head_dim, stride, len, staged, scale, softcap, kraw, kscale);
  } else {
    const int groups4 = head_dim / 4;
    for (int g0 = 0; g0 < group; g0 += kPassHeads) {
      const int gn = min(kPassHeads, group - g0);
      if (groups4 <= 32)
        score_pass<1>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap);
      else if (groups4 <= 64)
        score_pass<2>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap);
      else
        score_pass<4>(qg, kt, scores, g0, gn, head_dim, len, scale, softcap);
    }
  }
  __syncthreads();  // scores published, K rows read
  if (!v_separate) {
    stage_rows(v_stage, v_cache, row_off, head_dim, stage_stride, 0, staged, len);
    cp_async_commit();
  }

  // Softmax per q head, warp w taking heads w, w+4, ...: lane l holds positions l and
  // l+32; the max and the sum of exp(s - m) by warp butterflies (fixed order).
  for (int g = warp; g < group; g += kThreads / 32) {
    float* sc = scores + g * kChunk;
    const float a = sc[lane], b = sc[lane + 32];
    const float m = memra::cuda::warp_max(fmaxf(a, b));
    const float pa = expf(a - m), pb = expf(b - m);
    const float l = memra::cuda::warp_sum(pa + pb);
    sc[lane] = pa;
    sc[lane + 32] = pb;
    if (lane == 0) {
      sums[g] = l;
      if (!out) {
        const int64_t part = (i_entry * heads + h0 + g) * max_chunks + chunk;
        part_ml[part * 2] = m;
        part_ml[part * 2 + 1] = l;
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // V rows and the weights published
  if constexpr (kFp8) {  // V's codes into its tile; each weight times its V row's scale
    fp8_rows_to_tile(vraw, vt, head_dim, stride, staged);
    for (int i = tid; i < group * kChunk; i += kThreads)
      if (i % kChunk < len) scores[i] = scores[i] * vscale[i % kChunk];
    __syncthreads();
  }

  if constexpr (kMma) {
    float* o_row = out ? out + (t * heads + h0) * static_cast<int64_t>(head_dim) : nullptr;
    float* p_row = out ? nullptr : part_o + ((i_entry * heads + h0) * max_chunks + chunk) * head_dim;
    mma_output(scores, sums, vt, group, head_dim, stride, staged, o_row, p_row,
               static_cast<int64_t>(max_chunks) * head_dim);
  } else {
    // Output: thread (dim d, head slot) runs, per q head, one fmaf chain over the chunk's
    // positions in order (weights past `len` are 0 and so are the zero-filled V rows).
    // With head_dim < 128 the block's threads split the heads in slots.
    const int dcount = min(head_dim, kThreads), slots = kThreads / dcount;
    const int d0 = tid % dcount, slot = tid / dcount;
    for (int d = d0; slot < slots && d < head_dim; d += dcount) {  // (threads past the slots idle)
      for (int gb = slot; gb < group; gb += slots * kPvHeads) {
        float o[kPvHeads];
#pragma unroll
        for (int k = 0; k < kPvHeads; ++k) o[k] = 0.0f;
        for (int j = 0; j < len; j += 4) {
          const float v0 = load1(vt + (j + 0) * stride + d), v1 = load1(vt + (j + 1) * stride + d);
          const float v2 = load1(vt + (j + 2) * stride + d), v3 = load1(vt + (j + 3) * stride + d);
#pragma unroll
          for (int k = 0; k < kPvHeads; ++k) {
            const int g = gb + k * slots;
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
          const int g = gb + k * slots;
          if (g >= group) continue;
          if (out)  // memra_attention_combine's arithmetic for one chunk: w = 1, (o + 0) * (1 / l)
            out[(t * heads + h0 + g) * static_cast<int64_t>(head_dim) + d] = (o[k] + 0.0f) * (1.0f / sums[g]);
          else
            part_o[((i_entry * heads + h0 + g) * max_chunks + chunk) * head_dim + d] = o[k];
        }
      }
    }
  }
  if (out && xq) {
    // The group's outputs (contiguous in the row) as int8x32 blocks, a warp per block,
    // read back once every thread's stores are visible to the block.
    __syncthreads();
    const int64_t base = (t * heads + h0) * static_cast<int64_t>(head_dim);
    const int64_t qbase = (i_entry * heads + h0) * static_cast<int64_t>(head_dim);
    for (int b = warp; b < group * head_dim / 32; b += kThreads / 32)
      memra::cuda::quantize_lane_q8(out[base + 32 * b + lane], qbase + 32 * b + lane, xq, xm);
  }
  if (out && fp8_plane) {
    // The same for the fp8 GEMV: a warp per 128-element group of the group's outputs.
    __syncthreads();
    const int64_t base = (t * heads + h0) * static_cast<int64_t>(head_dim);
    const int64_t pbase = (i_entry * heads + h0) * static_cast<int64_t>(head_dim);
    for (int b = warp; b < group * head_dim / 128; b += kThreads / 32)
      memra::cuda::prepare_vec4_fp8(reinterpret_cast<const float4*>(out + base + 128 * b)[lane], pbase + 128 * b + 4 * lane,
                                    fp8_plane, fp8_back);
  }
}
}  // namespace

#define MEMRA_DEFINE_ATTENTION_CHUNK(NAME, KvT)                                                                      \
  extern "C" __global__ void __launch_bounds__(kThreads, 4)                                                          \
      NAME(const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads, int32_t kv_heads,                 \
           int32_t head_dim, int32_t block_size, const int32_t* positions, const int32_t* seq_index,                \
           const int32_t* block_tables, int32_t max_blocks, float scale, int32_t sliding_window, float softcap,     \
           int32_t max_chunks, float* part_o, float* part_ml, const int32_t* rows, const int32_t* fresh_from,       \
           int32_t v_separate, float* out, int8_t* xq, float2* xm, uint2* fp8_plane, float* fp8_back) {             \
    attention_chunk(q, k_cache, v_cache, heads, kv_heads, head_dim, block_size, positions, seq_index, block_tables, \
                    max_blocks, scale, sliding_window, softcap, max_chunks, part_o, part_ml, rows, fresh_from,      \
                    v_separate, out, xq, xm, fp8_plane, fp8_back);                                                   \
  }
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk, float)
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk_f16, __half)
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk_bf16, __nv_bfloat16)
MEMRA_DEFINE_ATTENTION_CHUNK(memra_attention_chunk_fp8, Fp8E4m3)

// grid (entries * heads, decode_combine_slices(head_dim)), kThreads threads; out:
// [tokens][heads * head_dim]. Block (row head, y) merges dims 32y .. 32y + 31 (fewer in the
// last one) so that a long row's partials are read by several blocks at once. Each block:
// the max of the chunks' m, then per chunk its weight w_c = exp(m_c - m) (once, kept in
// shared memory when the chunks fit) and l = sum l_c w_c (per thread over chunks t,
// t+128, ..., then the block sum); the output as float4 columns: thread (quad, slice)
// runs an fmaf chain over chunks slice, slice+slices, ... (its first kAhead partials
// loaded before the weights are known), and the slices are added in order. All orders
// depend on the chunk count and head_dim only. With `xq` (head_dim % 32 == 0: a block's
// 32 dims are one int8x32 block of the row) warp 0 also writes them quantised.
extern "C" __global__ void __launch_bounds__(kThreads)
    memra_attention_combine(const float* part_o, const float* part_ml, const int32_t* positions, int32_t heads,
                            int32_t head_dim, int32_t sliding_window, int32_t max_chunks, float* out,
                            const int32_t* rows, int8_t* xq, float2* xm) {
  constexpr int kDims = memra::attn::kCombineDims, kAhead = 4;
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  const int64_t th = blockIdx.x;
  const int64_t t = rows ? rows[th / heads] : th / heads;
  const int h = static_cast<int>(th % heads);
  const int32_t pos = positions[t];
  const int32_t n = pos - first_position(pos, sliding_window) + 1;
  const int chunks = (n + kChunk - 1) / kChunk;
  const float* ml = part_ml + th * max_chunks * 2;
  const int dim0 = static_cast<int>(blockIdx.y) * kDims, dims = min(kDims, head_dim - dim0);
  const int quads = dims / 4, slices = kThreads / quads;
  const int qd = threadIdx.x % quads, s = threadIdx.x / quads;
  const bool active = s < slices;  // (kThreads % quads threads idle when quads does not divide it)
  const float4* po = reinterpret_cast<const float4*>(part_o + th * max_chunks * head_dim + dim0) + qd;
  const int64_t stride = head_dim / 4;  // float4s per chunk
  float4 ahead[kAhead];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int c = s + i * slices;
    ahead[i] = active && c < chunks ? po[c * stride] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  __shared__ float scratch[32];
  constexpr int kStaged = 2048;
  __shared__ float wts[kStaged];
  __shared__ __align__(16) float partial[kThreads * 4];  // [slices][dims]: slices * dims == 4 * kThreads
  float m = -INFINITY;
  for (int c = threadIdx.x; c < chunks; c += kThreads) m = fmaxf(m, ml[2 * c]);
  m = memra::cuda::block_max(m, scratch);
  const bool staged = chunks <= kStaged;
  float l = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const float w = expf(ml[2 * c] - m);
    if (staged) wts[c] = w;
    l = fmaf(ml[2 * c + 1], w, l);
  }
  l = memra::cuda::block_sum(l, scratch);  // its barriers also publish wts
  const float inv = 1.0f / l;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto add = [&](int c, const float4& x) {
    const float w = staged ? wts[c] : expf(ml[2 * c] - m);
    acc.x = fmaf(x.x, w, acc.x);
    acc.y = fmaf(x.y, w, acc.y);
    acc.z = fmaf(x.z, w, acc.z);
    acc.w = fmaf(x.w, w, acc.w);
  };
  if (active) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i)
      if (s + i * slices < chunks) add(s + i * slices, ahead[i]);
#pragma unroll 4
    for (int c = s + kAhead * slices; c < chunks; c += slices) add(c, po[c * stride]);
    reinterpret_cast<float4*>(partial)[s * quads + qd] = acc;
  }
  __syncthreads();
  float* o = out + t * heads * head_dim + static_cast<int64_t>(h) * head_dim + dim0;
  for (int i = threadIdx.x; i < dims; i += kThreads) {
    float sum = partial[i];
    for (int sl = 1; sl < slices; ++sl) sum = __fadd_rn(sum, partial[sl * dims + i]);
    o[i] = sum * inv;
    if (xq)  // (dims == 32: warp 0, one element per lane)
      memra::cuda::quantize_lane_q8(sum * inv, th * head_dim + dim0 + i, xq, xm);
  }
}
