#include "kernels/attention/attention_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "repack/quant/fp_convert.hpp"

namespace memra::ref {
namespace {

inline int64_t slot_row(const PagedKvLayer& layer, const int32_t* block_table, int64_t position) {
  return static_cast<int64_t>(block_table[position / layer.block_size]) * layer.block_size + position % layer.block_size;
}
inline int64_t slot_offset(const PagedKvLayer& layer, const int32_t* block_table, int64_t position) {
  return slot_row(layer, block_table, position) * layer.kv_heads * layer.head_dim;
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

// One kv head's row at a position: element i as a float.
template <class T>
struct PlainRow {
  const T* p;
  float operator[](int64_t i) const { return load(p, i); }
};
struct Fp8Row {
  const uint8_t* codes;
  float scale;
  float operator[](int64_t i) const { return quant::f8_e4m3_to_f32(codes[i]) * scale; }
};

// Where (position, kv head)'s fp8 codes and scale live in a layer's blocks.
inline attn::Fp8KvSlot fp8_slot(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, int64_t kvh) {
  return attn::fp8_kv_slot(block_table[position / layer.block_size], position % layer.block_size, kvh, layer.block_size,
                           layer.kv_heads, layer.head_dim);
}

template <class T>
struct PlainRows {
  const PagedKvLayer& layer;
  const int32_t* table;
  PlainRow<T> k(int64_t pos, int64_t kvh) const { return {at(layer.k, pos, kvh)}; }
  PlainRow<T> v(int64_t pos, int64_t kvh) const { return {at(layer.v, pos, kvh)}; }
  const T* at(const void* plane, int64_t pos, int64_t kvh) const {
    return static_cast<const T*>(plane) + slot_offset(layer, table, pos) + kvh * layer.head_dim;
  }
};
struct Fp8Rows {
  const PagedKvLayer& layer;
  const int32_t* table;
  Fp8Row k(int64_t pos, int64_t kvh) const { return at(layer.k, pos, kvh); }
  Fp8Row v(int64_t pos, int64_t kvh) const { return at(layer.v, pos, kvh); }
  Fp8Row at(const void* plane, int64_t pos, int64_t kvh) const {
    const attn::Fp8KvSlot s = fp8_slot(layer, table, pos, kvh);
    const auto* b = static_cast<const uint8_t*>(plane);
    float scale;
    std::memcpy(&scale, b + s.scale, 4);
    return {b + s.codes, scale};
  }
};

// One arithmetic for every element type: only the row reader differs (each stored
// element read back as an exact float; an fp8 element times its row's scale).
template <class Rows>
void attend(const PagedKvLayer& layer, const Rows& rows, int64_t position, const float* q, int64_t heads, float scale,
            int64_t sliding_window, float logit_softcap, float* out) {
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
      const auto kj = rows.k(first + j, kvh);
      float s = 0.0f;
      for (int64_t i = 0; i < d; ++i) s += qh[i] * kj[i];
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
      const auto vj = rows.v(first + j, kvh);
      for (int64_t i = 0; i < d; ++i) oh[i] += w * vj[i];
    }
  }
}

// One (position, kv head) row of x quantised to fp8 at dst (codes) and its scale.
void write_fp8_row(const float* x, int64_t n, uint8_t* codes, uint8_t* scale_at) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 448.0f;
  for (int64_t i = 0; i < n; ++i) codes[i] = d == 0.0f ? 0 : quant::f32_to_f8_e4m3(x[i] / d);
  std::memcpy(scale_at, &d, 4);
}

}  // namespace

void paged_kv_write(const PagedKvLayer& layer, const int32_t* block_table, int64_t position, const float* k,
                    const float* v) {
  if (layer.element == KvElement::fp8) {
    for (int64_t h = 0; h < layer.kv_heads; ++h) {
      const attn::Fp8KvSlot s = fp8_slot(layer, block_table, position, h);
      auto* kb = static_cast<uint8_t*>(layer.k);
      auto* vb = static_cast<uint8_t*>(layer.v);
      write_fp8_row(k + h * layer.head_dim, layer.head_dim, kb + s.codes, kb + s.scale);
      write_fp8_row(v + h * layer.head_dim, layer.head_dim, vb + s.codes, vb + s.scale);
    }
    return;
  }
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
  switch (layer.element) {
    case KvElement::f16:
      return attend(layer, PlainRows<F16Bits>{layer, block_table}, position, q, heads, scale, sliding_window, logit_softcap, out);
    case KvElement::bf16:
      return attend(layer, PlainRows<Bf16Bits>{layer, block_table}, position, q, heads, scale, sliding_window, logit_softcap, out);
    case KvElement::fp8:
      return attend(layer, Fp8Rows{layer, block_table}, position, q, heads, scale, sliding_window, logit_softcap, out);
    case KvElement::f32:
      break;
  }
  attend(layer, PlainRows<float>{layer, block_table}, position, q, heads, scale, sliding_window, logit_softcap, out);
}

}  // namespace memra::ref
