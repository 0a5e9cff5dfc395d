// Helpers shared by the quantizers. Internal to memra_quantize.
#pragma once

#include <algorithm>
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

inline float clampf(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }  // maxps/minps

// The float16 a scale is stored as, decoded back: every error estimate uses the value
// the dequantizer will see.
inline float f16_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// Four float lanes (GCC/Clang vector extension: SSE on x86-64, NEON on Arm, scalar
// elsewhere). Written out explicitly because the compilers do not vectorise the
// quantizers' inner loops on their own without reassociating float sums.
typedef float v4f __attribute__((vector_size(16)));

inline v4f v4_load(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline v4f v4_splat(float x) { return v4f{x, x, x, x}; }
inline v4f v4_clamp(v4f v, v4f lo, v4f hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}
inline v4f v4_round_even(v4f v) {
  const v4f magic = v4_splat(12582912.0f);
  return (v + magic) - magic;
}
// Lane sum in a fixed order (deterministic).
inline float v4_sum(v4f v) { return ((v[0] + v[1]) + v[2]) + v[3]; }

inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

inline void store_f16(uint8_t* p, float v) { store_u16(p, f32_to_fp16(v)); }

inline bool finite_f16(float v) { return std::isfinite(fp16_to_f32(f32_to_fp16(v))); }

}  // namespace memra::quant::detail
