// RoPE on q and k (in place) fused with the paged-KV write of k and v. Grid (token,
// head) over the q heads then the kv heads: each block rotates one head, and a kv
// head's block also writes that head's k and v into the cache (one block per token
// put the whole step on one SM: 11 us per layer at batch 1). Rotation matches
// kernels/rope/rope_ref: angle = float(pos) * inv_freq[i], (cos, sin) *
// attention_factor, pairs (i, i + rotary_dim/2) for neox or (2i, 2i+1) interleaved;
// inv_freq is the reference's precomputed table (all scalings). Each element's
// arithmetic is the same whatever the grid, so results are unchanged by batching.
// The cache layout is kernels/attention/attention_ref's [block][slot][kv_head][head_dim].
#include <stdint.h>

extern "C" __global__ void memra_rope_kv_write(float* q, float* k, const float* v, int32_t q_heads, int32_t kv_heads,
                                               int32_t head_dim, int32_t rotary_dim, int32_t neox,
                                               const float* inv_freq, float attention_factor,
                                               const int32_t* positions, const int32_t* seq_index,
                                               const int32_t* block_tables, int32_t max_blocks, float* k_cache,
                                               float* v_cache, int32_t block_size) {
  const int64_t t = blockIdx.x;
  const int h = static_cast<int>(blockIdx.y);
  const int32_t pos = positions[t];
  const int64_t kw = static_cast<int64_t>(kv_heads) * head_dim;
  float* vec = h < q_heads ? q + (t * q_heads + h) * head_dim : k + t * kw + static_cast<int64_t>(h - q_heads) * head_dim;
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
  const int32_t block = block_tables[static_cast<int64_t>(seq_index[t]) * max_blocks + pos / block_size];
  const int64_t off = (static_cast<int64_t>(block) * block_size + pos % block_size) * kw + static_cast<int64_t>(kvh) * head_dim;
  const float* vh = v + t * kw + static_cast<int64_t>(kvh) * head_dim;
  for (int e = threadIdx.x; e < head_dim; e += blockDim.x) {
    k_cache[off + e] = vec[e];
    v_cache[off + e] = vh[e];
  }
}
