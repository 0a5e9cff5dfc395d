// RoPE on q and k (in place) fused with the paged-KV write of k and v. Grid (token,
// head) over the q heads then the kv heads: each block rotates one head, and a kv
// head's block also writes that head's k and v into the cache (one block per token
// put the whole step on one SM: 11 us per layer at batch 1). Rotation matches
// kernels/rope/rope_ref: angle = float(pos) * inv_freq[i], (cos, sin) *
// attention_factor, pairs (i, i + rotary_dim/2) for neox or (2i, 2i+1) interleaved;
// inv_freq is the reference's precomputed table (all scalings). Each element's
// arithmetic is the same whatever the grid, so results are unchanged by batching.
// The cache layout is kernels/attention/attention_ref's [block][slot][kv_head][head_dim].
// memra_rope_kv_write_f16 / _bf16 store K and V rounded to f16 / bf16 (round to nearest
// even, __float2half_rn / __float2bfloat16_rn, as the reference's f32_to_fp16 /
// f32_to_bf16); q and k themselves stay f32. memra_rope_kv_write_fp8 quantises each
// (position, kv head) row of K and of V to e4m3 with its scale d = amax / 448 (the
// reference's fp8 KV: kernels/attention/attention_ref.hpp; codes RNE and saturating,
// __nv_cvt_float_to_fp8 with __NV_SATFINITE, so the codes are the reference's bits).
// With q_norm / k_norm (memra_attention_params 2.4) each head is first RMS-normed in
// place (rms_norm's formula; thread i sums elements i, i + blockDim, ... in order, then
// the fixed block sum), so the per-head norm launches of Qwen3 go away.
// Without nvcc (tests/cuda/rope_kv_write_emulator_test.cpp includes this file on the host)
// the CUDA types and conversions come from the emulator.
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#include <stdint.h>

#include "kernels/attention/kv_fp8_layout.hpp"
#include "kernels/common/pdl.cuh"
#include "kernels/common/reduce.cuh"

namespace {
__device__ __forceinline__ void store_kv(float* dst, float x) { *dst = x; }
__device__ __forceinline__ void store_kv(__half* dst, float x) { *dst = __float2half_rn(x); }
__device__ __forceinline__ void store_kv(__nv_bfloat16* dst, float x) { *dst = __float2bfloat16_rn(x); }
__device__ __forceinline__ void store_kv(uint8_t*, float) {}  // (fp8 rows are written per row, with their scale)

template <class KvT>
__device__ __forceinline__ void rope_kv_write(float* q, float* k, const float* v, int32_t q_heads, int32_t kv_heads,
                                              int32_t head_dim, int32_t rotary_dim, int32_t neox,
                                              const float* inv_freq, float attention_factor,
                                              const int32_t* positions, const int32_t* seq_index,
                                              const int32_t* block_tables, int32_t max_blocks, KvT* k_cache,
                                              KvT* v_cache, int32_t block_size, const float* q_norm, const float* k_norm,
                                              float norm_eps) {
  memra::cuda::pdl_wait();  // PDL (kernels/common/pdl.cuh)
  memra::cuda::pdl_launch_dependents();
  const int64_t t = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  const int32_t pos = positions[t];
  const int64_t kw = static_cast<int64_t>(kv_heads) * head_dim;
  float* vec = h < q_heads ? q + (t * q_heads + h) * head_dim : k + t * kw + static_cast<int64_t>(h - q_heads) * head_dim;
  if (const float* nw = h < q_heads ? q_norm : k_norm) {
    __shared__ float scratch[32];
    float s = 0.0f;
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) s = fmaf(vec[e], vec[e], s);
    s = memra::cuda::block_sum(s, scratch);  // every read precedes its barrier
    const float inv = 1.0f / sqrtf(s / static_cast<float>(head_dim) + norm_eps);
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) vec[e] = (vec[e] * inv) * (nw[e] + 0.0f);
    __syncthreads();  // RoPE's pairs span threads
  }
  if (inv_freq != nullptr) {
    // Pairs are disjoint: each thread reads its pair, then writes it.
    const int pairs = rotary_dim / 2;
    for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
      const int ia = neox ? i : 2 * i, ib = neox ? i + pairs : 2 * i + 1;
      const float x1 = vec[ia], x2 = vec[ib];
      const float angle = static_cast<float>(pos) * inv_freq[i];
      const float c = cosf(angle) * attention_factor;
      const float s = sinf(angle) * attention_factor;
      vec[ia] = x1 * c - x2 * s;
      vec[ib] = x2 * c + x1 * s;
    }
  }
  if (h < q_heads) return;
  __syncthreads();  // the KV write below reads rotated k written by other threads
  const int kvh = h - q_heads;
  if constexpr (sizeof(KvT) == 1) {
    // fp8: codes and scales per kernels/attention/kv_fp8_layout.hpp.
    __shared__ float scratch[32];
    const int32_t block = block_tables[static_cast<int64_t>(seq_index[t]) * max_blocks + pos / block_size];
    const memra::attn::Fp8KvSlot slot = memra::attn::fp8_kv_slot(block, pos % block_size, kvh, block_size, kv_heads, head_dim);
    const int64_t codes = slot.codes, scale_at = slot.scale;
    const float* vh = v + t * kw + static_cast<int64_t>(kvh) * head_dim;
    for (int which = 0; which < 2; ++which) {
      const float* x = which == 0 ? vec : vh;
      uint8_t* cache = reinterpret_cast<uint8_t*>(which == 0 ? k_cache : v_cache);
      float amax = 0.0f;
      for (int e = threadIdx.x; e < head_dim; e += blockDim.x) amax = fmaxf(amax, fabsf(x[e]));
      amax = memra::cuda::block_max(amax, scratch);
      const float d = __fdiv_rn(amax, 448.0f);
      for (int e = threadIdx.x; e < head_dim; e += blockDim.x)
        cache[codes + e] = d == 0.0f ? 0 : __nv_cvt_float_to_fp8(__fdiv_rn(x[e], d), __NV_SATFINITE, __NV_E4M3);
      if (threadIdx.x == 0) *reinterpret_cast<float*>(cache + scale_at) = d;
    }
    return;
  }
  const int32_t block = block_tables[static_cast<int64_t>(seq_index[t]) * max_blocks + pos / block_size];
  const int64_t off = (static_cast<int64_t>(block) * block_size + pos % block_size) * kw + static_cast<int64_t>(kvh) * head_dim;
  const float* vh = v + t * kw + static_cast<int64_t>(kvh) * head_dim;
  for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
    store_kv(k_cache + off + e, vec[e]);
    store_kv(v_cache + off + e, vh[e]);
  }
}
}  // namespace

#define MEMRA_DEFINE_ROPE_KV_WRITE(NAME, KvT)                                                                    \
  extern "C" __global__ void NAME(float* q, float* k, const float* v, int32_t q_heads, int32_t kv_heads,         \
                                  int32_t head_dim, int32_t rotary_dim, int32_t neox, const float* inv_freq,     \
                                  float attention_factor, const int32_t* positions, const int32_t* seq_index,    \
                                  const int32_t* block_tables, int32_t max_blocks, KvT* k_cache, KvT* v_cache,   \
                                  int32_t block_size, const float* q_norm, const float* k_norm, float norm_eps) { \
    rope_kv_write(q, k, v, q_heads, kv_heads, head_dim, rotary_dim, neox, inv_freq, attention_factor, positions, \
                  seq_index, block_tables, max_blocks, k_cache, v_cache, block_size, q_norm, k_norm, norm_eps);  \
  }
MEMRA_DEFINE_ROPE_KV_WRITE(memra_rope_kv_write, float)
MEMRA_DEFINE_ROPE_KV_WRITE(memra_rope_kv_write_f16, __half)
MEMRA_DEFINE_ROPE_KV_WRITE(memra_rope_kv_write_bf16, __nv_bfloat16)
MEMRA_DEFINE_ROPE_KV_WRITE(memra_rope_kv_write_fp8, uint8_t)
