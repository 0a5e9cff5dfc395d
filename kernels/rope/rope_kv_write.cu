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
    // Pairs are disjoint, so a thread loads all of a pass's pairs before it stores any.
    constexpr int kPass = 8;
    const int pairs = rotary_dim / 2;
    const int items = (q_heads + kv_heads) * pairs;
    for (int base = threadIdx.x; base < items; base += kPass * blockDim.x) {
      float x1[kPass], x2[kPass], c[kPass], s[kPass];
      float* vec[kPass];
      int ia[kPass], ib[kPass];
#pragma unroll
      for (int p = 0; p < kPass; ++p) {
        const int idx = base + p * blockDim.x;
        vec[p] = nullptr;
        if (idx < items) {
          const int h = idx / pairs, i = idx % pairs;
          vec[p] = h < q_heads ? qt + static_cast<int64_t>(h) * head_dim : kt + static_cast<int64_t>(h - q_heads) * head_dim;
          ia[p] = neox ? i : 2 * i;
          ib[p] = neox ? i + pairs : 2 * i + 1;
          x1[p] = vec[p][ia[p]];
          x2[p] = vec[p][ib[p]];
          const float angle = static_cast<float>(pos) * inv_freq[i];
          c[p] = cosf(angle) * attention_factor;
          s[p] = sinf(angle) * attention_factor;
        }
      }
#pragma unroll
      for (int p = 0; p < kPass; ++p) {
        if (vec[p]) {
          vec[p][ia[p]] = x1[p] * c[p] - x2[p] * s[p];
          vec[p][ib[p]] = x2[p] * c[p] + x1[p] * s[p];
        }
      }
    }
    __syncthreads();  // the KV write below reads rotated k written by other threads
  }
  const int32_t block = block_tables[static_cast<int64_t>(seq_index[t]) * max_blocks + pos / block_size];
  const int64_t off = (static_cast<int64_t>(block) * block_size + pos % block_size) * kw;
  for (int64_t e = threadIdx.x * 4; e < kw; e += blockDim.x * 4) {
    if (e + 4 <= kw && kw % 4 == 0) {
      // head_dim is even and rows are 16-byte aligned when kw % 4 == 0.
      const float4 kv4 = *reinterpret_cast<const float4*>(kt + e);
      const float4 vv4 = *reinterpret_cast<const float4*>(v + t * kw + e);
      *reinterpret_cast<float4*>(k_cache + off + e) = kv4;
      *reinterpret_cast<float4*>(v_cache + off + e) = vv4;
    } else {
      for (int64_t j = e; j < e + 4 && j < kw; ++j) {
        k_cache[off + j] = kt[j];
        v_cache[off + j] = v[t * kw + j];
      }
    }
  }
}
