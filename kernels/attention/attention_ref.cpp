#include "kernels/attention/attention_ref.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "repack/quant/fp_convert.hpp"

namespace memra::ref {
namespace {

inline int64_t slot_offset(const PagedKvLayer& layer, const int32_t* block_table, int64_t position) {
  const int64_t block = block_table[position / layer.block_size];
  const int64_t row = block * layer.block_size + position % layer.block_size;
  return row * layer.kv_heads * layer.head_dim;
}

// The stored element types, read back as exact floats.
struct F16Bits {
  uint16_t bits;
};
struct Bf16Bits {
  uint16_t bits;
};
inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const F16Bits* p, int64_t i) { return quant::fp16_to_f32(p[i].bits); }
inline float load(const Bf16Bits* p, int64_t i) { return quant::bf16_to_f32(p[i].bits); }

// One arithmetic for every element type: only the load differs (16-bit -> f32 is exact).
template <class T>
void attend(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* q, int64_t heads,
            float scale, int64_t sliding_window, float logit_softcap, float* out) {
  const T* kc = static_cast<const T*>(layer.k);
  const T* vc = static_cast<const T*>(layer.v);
  const int64_t d = layer.head_dim;
  const int64_t group = heads / layer.kv_heads;
  const int64_t first = sliding_window > 0 ? std::max<int64_t>(0, position - sliding_window + 1) : 0;
  const int64_t n = position - first + 1;
  std::vector<float> p(static_cast<size_t>(n));
  for (int64_t h = 0; h < heads; ++h) {
    const float* qh = q + h * d;
    const int64_t kvh = h / group;
    float max_score = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const T* kj = kc + slot_offset(layer, block_table, first + j) + kvh * d;
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += qh[i] * load(kj, i);
      s *= scale;
      if (logit_softcap > 0.0f) s = logit_softcap * std::tanh(s / logit_softcap);
      p[static_cast<size_t>(j)] = s;
      max_score = std::max(max_score, s);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max_score);
      sum += p[static_cast<size_t>(j)];
    }
    // Normalise first, then weight V: the order transformers' eager attention uses.
    float* oh = out + h * d;
    std::fill(oh, oh + d, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float w = p[static_cast<size_t>(j)] / sum;
      const T* vj = vc + slot_offset(layer, block_table, first + j) + kvh * d;
      for (int64_t i = 0; i < d; ++i) oh[i] += w * load(vj, i);
    }
  }
}

}  // namespace

void paged_kv_write(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* k,
                    const float* v) {
  const int64_t off = slot_offset(layer, block_table, position);
  const int64_t n = layer.kv_heads * layer.head_dim;
  if (layer.element != KvElement::f32) {
    uint16_t (*round)(float) = layer.element == KvElement::f16 ? quant::f32_to_fp16 : quant::f32_to_bf16;
    uint16_t* kd = static_cast<uint16_t*>(layer.k) + off;
    uint16_t* vd = static_cast<uint16_t*>(layer.v) + off;
    for (int64_t i = 0; i < n; ++i) {
      kd[i] = round(k[i]);
      vd[i] = round(v[i]);
    }
    return;
  }
  std::copy(k, k + n, static_cast<float*>(layer.k) + off);
  std::copy(v, v + n, static_cast<float*>(layer.v) + off);
}

void paged_attention(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* q,
                     int64_t heads, float scale, int64_t sliding_window, float logit_softcap, float* out) {
  if (layer.element == KvElement::f16)
    attend<F16Bits>(layer, block_table, position, q, heads, scale, sliding_window, logit_softcap, out);
  else if (layer.element == KvElement::bf16)
    attend<Bf16Bits>(layer, block_table, position, q, heads, scale, sliding_window, logit_softcap, out);
  else
    attend<float>(layer, block_table, position, q, heads, scale, sliding_window, logit_softcap, out);
}

}  // namespace memra::ref
