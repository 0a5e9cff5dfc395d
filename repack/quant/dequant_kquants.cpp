// K-quants: 256-element super-blocks with 16- or 32-element sub-block scales.
#include "repack/quant/block_read.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::quant {
using detail::load_f16;

// Q2_K block (84 bytes): scales[16] (low nibble scale, high nibble min), qs[64]
// (2-bit codes), f16 d, f16 dmin. Element e = 128*h + 32*s + l takes bits 2s..2s+1
// of qs[32*h + l]; its 16-element group is e/16. y = (d*sc)*q - (dmin*m).
void dequantize_q2_k(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 84, dst += 256) {
    const uint8_t* scales = b;
    const uint8_t* qs = b + 16;
    const float d = load_f16(b + 80);
    const float dmin = load_f16(b + 82);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int q = (qs[32 * h + l] >> (2 * s)) & 3;
      const uint8_t sc = scales[e / 16];
      const float dl = d * static_cast<float>(sc & 0x0f);
      const float ml = dmin * static_cast<float>(sc >> 4);
      dst[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

// Q3_K block (110 bytes): hmask[32], qs[64] (low 2 bits), scales[12] (16 packed
// 6-bit scales, offset 32), f16 d. Low bits as Q2_K; the high bit of element e is
// bit e/32 of hmask[e%32], and a CLEAR bit subtracts 4. y = (d*(sc-32)) * q.
void dequantize_q3_k(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 110, dst += 256) {
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32;
    const uint8_t* sc = b + 96;
    const float d = load_f16(b + 108);
    float dl[16];
    for (int g = 0; g < 16; ++g) {
      const int lo = g < 8 ? (sc[g] & 0x0f) : (sc[g - 8] >> 4);
      const int hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 3;
      dl[g] = d * static_cast<float>((lo | (hi << 4)) - 32);
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, s = (e / 32) % 4, l = e % 32;
      const int low = (qs[32 * h + l] >> (2 * s)) & 3;
      const int high_set = (hmask[l] >> (e / 32)) & 1;
      const int q = low - (high_set ? 0 : 4);
      dst[e] = dl[e / 16] * static_cast<float>(q);
    }
  }
}

namespace {

// The 12-byte scale/min field shared by Q4_K and Q5_K: eight 6-bit scales and
// eight 6-bit mins. Sub-blocks 0..3 use the low 6 bits of bytes 0..3 (scales) and
// 4..7 (mins); sub-blocks 4..7 take their low 4 bits from bytes 8..11 and their top
// 2 bits from the top bits of bytes 0..3 (scales) / 4..7 (mins).
void unpack_scale_min_k4(const uint8_t* s, int sc[8], int mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0f) | ((s[j] >> 6) << 4);
    mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

}  // namespace

// Q4_K block (144 bytes): f16 d, f16 dmin, scales[12], qs[128]. Sub-block g = 2c + t
// (32 elements) takes nibble t of qs[32c + l]. y = (d*sc)*q - (dmin*m).
void dequantize_q4_k(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 144, dst += 256) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(b + 4, sc, mn);
    const uint8_t* qs = b + 16;
    for (int g = 0; g < 8; ++g) {
      const float dg = d * static_cast<float>(sc[g]);
      const float mg = dmin * static_cast<float>(mn[g]);
      const int c = g / 2, shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[32 * c + l] >> shift) & 0x0f;
        dst[32 * g + l] = dg * static_cast<float>(q) - mg;
      }
    }
  }
}

// Q5_K block (176 bytes): f16 d, f16 dmin, scales[12], qh[32], qs[128]. Low nibbles
// as Q4_K; the fifth bit of sub-block g, element l is bit g of qh[l].
void dequantize_q5_k(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 176, dst += 256) {
    const float d = load_f16(b);
    const float dmin = load_f16(b + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(b + 4, sc, mn);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + 48;
    for (int g = 0; g < 8; ++g) {
      const float dg = d * static_cast<float>(sc[g]);
      const float mg = dmin * static_cast<float>(mn[g]);
      const int c = g / 2, shift = 4 * (g % 2);
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[32 * c + l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4);
        dst[32 * g + l] = dg * static_cast<float>(q) - mg;
      }
    }
  }
}

// Q6_K block (210 bytes): ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16], f16 d. For element e = 128*h + r: low bits are nibble r/64 of
// ql[64h + r%64], high bits are bits 2*(r/32).. of qh[32h + r%32]. y = (d*sc)*(q-32).
void dequantize_q6_k(const void* src, float* dst, int64_t nb) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < nb; ++i, b += 210, dst += 256) {
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = load_f16(b + 208);
    float dl[16];
    for (int g = 0; g < 16; ++g) dl[g] = d * static_cast<float>(scales[g]);
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, r = e % 128;
      const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
      const int q = (low | (high << 4)) - 32;
      dst[e] = dl[e / 16] * static_cast<float>(q);
    }
  }
}

}  // namespace memra::quant
