// Helpers shared by the quantizers. Internal to memra_quantize.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "repack/quant/fp_convert.hpp"

namespace memra::quant::detail {

// Round to nearest, ties to even, for |v| < 2^22 (callers clamp first). Adding and
// subtracting 1.5 * 2^23 leaves the integer part in the mantissa (IEEE rounding, which
// the compiler may not fold away without -ffast-math); it vectorises where
// std::nearbyint does not.
inline float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The float16 a scale is stored as, decoded back: every error estimate uses the value
// the dequantizer will see.
inline float f16_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

inline void store_f16(uint8_t* p, float v) { store_u16(p, f32_to_fp16(v)); }

inline bool finite_f16(float v) { return std::isfinite(fp16_to_f32(f32_to_fp16(v))); }

}  // namespace memra::quant::detail
