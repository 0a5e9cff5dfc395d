// fp16 / bf16 / f8_e4m3 conversions against independent references: the
// closed-form value of every bit pattern (std::ldexp), the compiler's own
// _Float16 conversion, and round-to-nearest-even properties.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::quant {
namespace {

TEST(DequantFloat, Fp16ToF32EveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int sign = (h >> 15) & 1, exp = (h >> 10) & 31, man = h & 1023;
    const float got = fp16_to_f32(static_cast<uint16_t>(h));
    if (exp == 31) {
      if (man == 0) EXPECT_TRUE(std::isinf(got) && std::signbit(got) == (sign == 1)) << h;
      else EXPECT_TRUE(std::isnan(got)) << h;
      continue;
    }
    const double mag = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
    const double want = sign ? -mag : mag;
    ASSERT_EQ(static_cast<double>(got), want) << "half bits " << h;
    ASSERT_EQ(std::signbit(got), sign == 1) << h;
    ASSERT_EQ(f32_to_fp16(got), h) << "round trip of " << h;
  }
}

TEST(DequantFloat, F32ToFp16MatchesCompilerConversion) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  auto check = [](float f) {
    const _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    const uint16_t got = f32_to_fp16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_f32(got)));
    } else {
      EXPECT_EQ(got, ref_bits) << "f32 bits " << f32_to_bits(f);
    }
  };
  for (int i = 0; i < 200000; ++i) check(bits_to_f32(bits(rng)));
  // Magnitudes around the half range, including subnormals and ties.
  std::uniform_real_distribution<float> mag(-20.0f, 17.0f);
  for (int i = 0; i < 200000; ++i) check((i % 2 ? -1.0f : 1.0f) * std::exp2(mag(rng)));
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98023224e-8f, 5.96046448e-8f, 6.10351562e-5f})
    check(f);
}

TEST(DequantFloat, Bf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(static_cast<uint16_t>(b));
    ASSERT_EQ(f32_to_bits(f), b << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(f32_to_bf16(f), b);
    }
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t x = bits(rng);
    const float f = bits_to_f32(x);
    const uint16_t r = f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(r)));
      continue;
    }
    // r is one of the two bf16 neighbours of x, the nearer one, ties to even.
    const uint16_t lo = static_cast<uint16_t>(x >> 16);
    const uint32_t rem = x & 0xffff;
    const uint16_t want = rem > 0x8000 || (rem == 0x8000 && (lo & 1)) ? static_cast<uint16_t>(lo + 1) : lo;
    ASSERT_EQ(r, want) << x;
  }
}

TEST(DequantFloat, F8E4M3EveryPattern) {
  for (uint32_t v = 0; v < 256; ++v) {
    const int sign = (v >> 7) & 1, exp = (v >> 3) & 15, man = v & 7;
    float got;
    dequantize_f8_e4m3(&v, &got, 1);  // little-endian: the low byte of v
    if (exp == 15 && man == 7) {
      EXPECT_TRUE(std::isnan(got)) << v;
      continue;
    }
    const double mag = exp == 0 ? std::ldexp(man, -9) : std::ldexp(8 + man, exp - 10);
    EXPECT_EQ(static_cast<double>(got), sign ? -mag : mag) << v;
  }
  EXPECT_EQ(f8_e4m3_to_f32(0x7e), 448.0f);  // the format's largest finite value
}

}  // namespace
}  // namespace memra::quant
