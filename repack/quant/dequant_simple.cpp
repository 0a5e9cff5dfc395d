// Plain float formats and the 32-element block quants (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0).
#include "repack/quant/block_read.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::quant {
using detail::load_f16;
using detail::load_u16;
using detail::load_u32;

void dequantize_f32(const void* src, float* dst, int64_t n) {
  if (n <= 0) return;  // empty tensors may come with null pointers
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void dequantize_f16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(load_u16(p + 2 * i));
}

void dequantize_bf16(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load_u16(p + 2 * i));
}

void dequantize_f8_e4m3(const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(p[i]);
}

// Q4_0 block (18 bytes): f16 d, 16 bytes of nibbles. Element j < 16 is the low
// nibble of byte j, element j + 16 the high nibble. y = d * (q - 8).
void dequantize_q4_0(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 18, dst += 32) {
    const float d = load_f16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
      dst[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
    }
  }
}

// Q4_1 block (20 bytes): f16 d, f16 m, nibbles as Q4_0. y = d*q + m.
void dequantize_q4_1(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 20, dst += 32) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
      dst[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }
}

// Q5_0 block (22 bytes): f16 d, u32 qh (bit j = 5th bit of element j), nibbles as
// Q4_0. y = d * (q - 16).
void dequantize_q5_0(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 22, dst += 32) {
    const float d = load_f16(b);
    const uint32_t qh = load_u32(b + 2);
    const uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

// Q5_1 block (24 bytes): f16 d, f16 m, u32 qh, nibbles. y = d*q + m.
void dequantize_q5_1(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 24, dst += 32) {
    const float d = load_f16(b);
    const float m = load_f16(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const uint8_t* qs = b + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// Q8_0 block (34 bytes): f16 d, 32 int8. y = q * d.
void dequantize_q8_0(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 34, dst += 32) {
    const float d = load_f16(b);
    for (int j = 0; j < 32; ++j) dst[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  }
}

}  // namespace memra::quant
