// Exact conversions between float32 and the 16/8-bit float formats checkpoints use.
// Header-only and standard-library-only: quant plugins and kernels' CPU references
// include it directly.
#pragma once

#include <cstdint>
#include <cstring>

namespace memra::quant {

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// IEEE binary16 -> binary32, exact for every input (subnormals, inf, NaN payloads
// are kept the way numpy's float16.astype(float32) keeps them).
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_to_f32(sign);
    // Subnormal half: normalise into a float32 normal number.
    exp = 113;  // 127 - 14
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x3ffu;
    return bits_to_f32(sign | (exp << 23) | (man << 13));
  }
  return bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

// binary32 -> binary16, round to nearest even; NaN stays NaN (quiet), overflow -> inf.
inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24, rounded to nearest even.
    if (abs < 0x33000000u) return sign;  // < 2^-25 rounds to zero
    const uint32_t exp = abs >> 23;
    const uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // man * 2^(exp-150) in units of 2^-24
    uint32_t q = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias exponent, round mantissa 23 -> 10 bits.
  uint32_t r = abs - 0x38000000u;  // exponent 127 -> 15 bias
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // carry may bump the exponent: fine
  return static_cast<uint16_t>(sign | r);
}

inline float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }

// binary32 -> bfloat16, round to nearest even; NaN forced quiet (same rule as ggml).
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64u);
  return static_cast<uint16_t>((static_cast<uint64_t>(x) + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// float8 e4m3fn (safetensors F8_E4M3): bias 7, no infinities, S.1111.111 is NaN. Exact.
inline float f8_e4m3_to_f32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  uint32_t exp = (v >> 3) & 0xfu;
  uint32_t man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return bits_to_f32(sign | 0x7fc00000u);
  if (exp == 0) {
    if (man == 0) return bits_to_f32(sign);
    exp = 121;  // 127 - 6: normalise the subnormal (man * 2^-9)
    while ((man & 0x8u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x7u;
    return bits_to_f32(sign | (exp << 23) | (man << 20));
  }
  return bits_to_f32(sign | ((exp + 120) << 23) | (man << 20));
}

// float32 -> float8 e4m3fn: round to nearest, ties to even; values beyond +-448 (and
// infinities) saturate to +-448; NaN -> 0x7f with the sign (the fp8 weight quantiser's
// and the fp8 KV cache's rounding; CUDA's __nv_cvt_float_to_fp8 with __NV_SATFINITE).
inline uint8_t f32_to_f8_e4m3(float x) {
  const uint32_t bits = f32_to_bits(x);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);  // NaN
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7e);  // >= 448 (and inf): saturate
  if (a < 0x3c800000u) {
    // Below 2^-6: subnormal codes m * 2^-9 (m = 8 is the smallest normal, code 0x08).
    // |x| * 512 is exact; round to nearest even by hand (no dependence on the FP mode).
    const float y = bits_to_f32(a) * 512.0f;
    auto m = static_cast<uint32_t>(y);  // truncation: y < 8
    const float frac = y - static_cast<float>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1u))) ++m;
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(m));
  }
  // Normal: round the 23-bit mantissa to 3 bits (ties to even); a carry bumps the
  // exponent, which is the right answer. Re-bias 127 -> 7.
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  const uint32_t exp = (r >> 23) - 127u + 7u;
  const uint32_t code = (exp << 3) | ((r >> 20) & 7u);
  return static_cast<uint8_t>(sign | (code > 0x7e ? 0x7e : code));
}

}  // namespace memra::quant
