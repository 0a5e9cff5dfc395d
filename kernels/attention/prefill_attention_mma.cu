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
//    first window position) are staged as zeros; they are masked for every row. A
//    staged position a row masks adds P = 0 exactly (0 * v products), whatever v is —
//    as long as v is finite, which KV the model wrote always is here.
//  - A prompt row is not bitwise the decode kernel's row for the same position (other
//    arithmetic); decode and verify rows always take the decode kernel.
// The body (prefill_attention_body.cuh) also runs on a host emulator of the warp
// primitives in tests/cuda (reference bound, chunking bit checks, smem race checks).
//
// Accuracy: every f32 operand x is split into bf16 hi = bf16(x), lo = bf16(x - hi);
// the products hi·hi + lo·hi + hi·lo are exact in f32 and miss only lo·lo and the
// split's residue, ~2^-16 of |x·y| worst, ~2^-17 typical. For q, k ~ N(0,1) and head
// dim 128 that is ~5e-6 absolute in a score; normalised MSE vs the f32 reference
// ~1e-11 (kernel-check bound kAttentionBound = 1e-9, the decode kernel's).
// The _bf16 kernels read a bf16 KV cache: K/V are exact bf16 already, so they are the
// hi operand as stored and their lo term (zero) is skipped; only q's and P's split
// residue remains (nmse ~1e-11 against the reference over the same bf16 cache). The _f16
// kernels convert an f16 cache's K/V exactly to floats as they load them and then run the
// f32 kernel's code (bitwise the f32 kernel on f16-valued K/V).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

#include "kernels/attention/prefill_attention_body.cuh"

namespace {
using namespace memra::attn;

// The body's primitives on the GPU (prefill_attention_body.cuh lists them).
struct DeviceOps {
  uint32_t base;
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int cta() const { return static_cast<int>(blockIdx.x); }
  __device__ __forceinline__ uint32_t smem() const { return base; }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ void syncwarp() const { __syncwarp(); }
  __device__ __forceinline__ float shfl_xor(float v, int mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }

  // (a, b) = hi + lo: hi = bf16(a), bf16(b) (round to nearest), lo = bf16 of the exact
  // remainders. The low 16 bits hold a (the mma's lower k index).
  __device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo) const {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    const float ha = __low2float(h), hb = __high2float(h);
    __nv_bfloat162 l = __floats2bfloat162_rn(isfinite(ha) ? a - ha : 0.0f, isfinite(hb) ? b - hb : 0.0f);
    hi = *reinterpret_cast<uint32_t*>(&h);
    lo = *reinterpret_cast<uint32_t*>(&l);
  }
  __device__ __forceinline__ void st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) const {
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d));
  }
  __device__ __forceinline__ void load8(const float* src, float (&v)[8]) const {
    const float4 a = *reinterpret_cast<const float4*>(src);
    const float4 b = *reinterpret_cast<const float4*>(src + 4);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  }
  __device__ __forceinline__ void load8_16bit(const uint16_t* src, uint32_t (&w)[4]) const {
    const uint4 a = *reinterpret_cast<const uint4*>(src);
    w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
  }
  // split2 with f16 operands (an f16 cache's q and P).
  __device__ __forceinline__ void split2_f16(float a, float b, uint32_t& hi, uint32_t& lo) const {
    __half2 h = __floats2half2_rn(a, b);
    const float ha = __low2float(h), hb = __high2float(h);
    __half2 l = __floats2half2_rn(isfinite(ha) ? a - ha : 0.0f, isfinite(hb) ? b - hb : 0.0f);
    hi = *reinterpret_cast<uint32_t*>(&h);
    lo = *reinterpret_cast<uint32_t*>(&l);
  }
  __device__ __forceinline__ float load_f32(const uint8_t* src) const { return *reinterpret_cast<const float*>(src); }
  // 8 e4m3 codes as exact bf16 (e4m3 -> f16 -> f32 -> bf16, each step exact), four words.
  __device__ __forceinline__ void load8_fp8_bf16(const uint8_t* src, uint32_t (&w)[4]) const {
    const uint2 c = *reinterpret_cast<const uint2*>(src);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t word = i < 2 ? c.x : c.y;
      const __half2_raw h =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((word >> (16 * (i & 1))) & 0xffffu), __NV_E4M3);
      __nv_bfloat162 b = __floats2bfloat162_rn(__half2float(__ushort_as_half(h.x)), __half2float(__ushort_as_half(h.y)));
      w[i] = *reinterpret_cast<uint32_t*>(&b);
    }
  }
  __device__ __forceinline__ void store2(float* dst, float x, float y) const {
    *reinterpret_cast<float2*>(dst) = make_float2(x, y);
  }
  __device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) const {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t (&r)[4]) const {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  // d += a * b for one 16x8x16 tile (a: the A fragment's 4 registers, b: B's 2).
  __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

}  // namespace

// grid (CTAs of the plan), kPrefillThreads threads, prefill_attention_smem_bytes(D) of
// dynamic shared memory. q, out: [tokens][heads * D]; caches: [blocks][block_size][kv_heads][D]
// of KvT (float, PaF16 f16 bits for the _f16 kernels, uint16_t bf16 bits for the _bf16 ones).
#define MEMRA_DEFINE_PREFILL_ATTENTION(NAME, D, KvT)                                                                \
  extern "C" __global__ void __launch_bounds__(kPrefillThreads, 2) NAME(                                            \
      const float* q, const KvT* k_cache, const KvT* v_cache, int32_t heads, int32_t kv_heads,                     \
      int32_t block_size, const int32_t* positions, const int32_t* block_tables, int32_t max_blocks, float scale,   \
      int32_t sliding_window, float softcap, const int32_t* tasks, float* out) {                                    \
    extern __shared__ __align__(128) uint8_t smem[];                                                                \
    DeviceOps ops{static_cast<uint32_t>(__cvta_generic_to_shared(smem))};                                           \
    prefill_attention_body<D, KvT>(ops, q, k_cache, v_cache, heads, kv_heads, block_size, positions, block_tables,       \
                              max_blocks, scale, sliding_window, softcap, tasks, out);                              \
  }
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd64, 64, float)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd128, 128, float)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd64_f16, 64, PaF16)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd128_f16, 128, PaF16)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd64_bf16, 64, uint16_t)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd128_bf16, 128, uint16_t)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd64_fp8, 64, PaFp8)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd128_fp8, 128, PaFp8)
// head_dim 256 (Qwen3.5 / Qwen3-Next, Gemma): 192 KB of shared memory, one CTA per SM.
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd256, 256, float)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd256_f16, 256, PaF16)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd256_bf16, 256, uint16_t)
MEMRA_DEFINE_PREFILL_ATTENTION(memra_prefill_attention_hd256_fp8, 256, PaFp8)
