// RoPE on q and k (in place) fused with the paged-KV write of k and v, one block per
// token. Rotation matches kernels/rope/rope_ref: angle = float(pos) * inv_freq[i],
// (cos, sin) * attention_factor, pairs (i, i + rotary_dim/2) for neox or (2i, 2i+1)
// interleaved; inv_freq is the reference's precomputed table (all scalings). The
// cache layout is kernels/attention/attention_ref's [block][slot][kv_head][head_dim].
#include <stdint.h>

extern "C" __global__ void memra_rope_kv_write(float* q, float* k, const float* v, int32_t q_heads, int32_t kv_heads,
                                               int32_t head_dim, int32_t rotary_dim, int32_t neox,
                                               const float* inv_freq, float attention_factor,
                                               const int32_t* positions, const int32_t* seq_index,
                                               const int32_t* block_tables, int32_t max_blocks, float* k_cache,
                                               float* v_cache, int32_t block_size) {
  const int64_t t = blockIdx.x;
  const int32_t pos = positions[t];
  const int64_t qw = static_cast<int64_t>(q_heads) * head_dim;
  const int64_t kw = static_cast<int64_t>(kv_heads) * head_dim;
  float* qt = q + t * qw;
  float* kt = k + t * kw;
  if (inv_freq != nullptr) {
    const int pairs = rotary_dim / 2;
    const int items = (q_heads + kv_heads) * pairs;
    for (int idx = threadIdx.x; idx < items; idx += blockDim.x) {
      const int h = idx / pairs, i = idx % pairs;
      float* vec = h < q_heads ? qt + static_cast<int64_t>(h) * head_dim : kt + static_cast<int64_t>(h - q_heads) * head_dim;
      const float angle = static_cast<float>(pos) * inv_freq[i];
      const float c = cosf(angle) * attention_factor;
      const float s = sinf(angle) * attention_factor;
      const int a = neox ? i : 2 * i;
      const int b = neox ? i + pairs : 2 * i + 1;
      const float x1 = vec[a], x2 = vec[b];
      vec[a] = x1 * c - x2 * s;
      vec[b] = x2 * c + x1 * s;
    }
    __syncthreads();  // the KV write below reads rotated k written by other threads
  }
  const int32_t block = block_tables[static_cast<int64_t>(seq_index[t]) * max_blocks + pos / block_size];
  const int64_t off = (static_cast<int64_t>(block) * block_size + pos % block_size) * kw;
  for (int64_t e = threadIdx.x; e < kw; e += blockDim.x) {
    k_cache[off + e] = kt[e];
    v_cache[off + e] = v[t * kw + e];
  }
}
