// memra fp8 layout v1: per row, cols/128 float32 scales, then cols e4m3fn bytes.
// A group's scale is amax/448, so its largest magnitude lands on e4m3's largest finite
// value and nothing saturates; each value is x/scale rounded to nearest even.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "repack/quantize/quantize.hpp"
#include "repack/quantize/quantize_internal.hpp"

namespace memra::quant {

uint8_t f32_to_f8_e4m3(float x) {
  const uint32_t bits = f32_to_bits(x);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7f);  // NaN
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7e);  // >= 448 (and inf): saturate
  if (a < 0x3c800000u) {
    // Below 2^-6: subnormal codes m * 2^-9 (m = 8 is the smallest normal, code 0x08).
    // |x| * 512 is exact; nearbyint rounds to nearest even in the default mode.
    const float m = std::nearbyint(bits_to_f32(a) * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(m));
  }
  // Normal: round the 23-bit mantissa to 3 bits (ties to even); a carry bumps the
  // exponent, which is the right answer. Re-bias 127 -> 7.
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  const uint32_t exp = (r >> 23) - 127u + 7u;
  const uint32_t code = (exp << 3) | ((r >> 20) & 7u);
  return static_cast<uint8_t>(sign | (code > 0x7e ? 0x7e : code));
}

void quantize_fp8_row(const float* x, void* dst, int64_t cols) {
  auto* out = static_cast<uint8_t*>(dst);
  const int64_t groups = cols / kFp8Group;
  uint8_t* q = out + groups * 4;
  for (int64_t g = 0; g < groups; ++g) {
    const float* v = x + g * kFp8Group;
    float amax = 0.0f;
    for (int64_t i = 0; i < kFp8Group; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    float scale = amax / 448.0f;
    // A scale in float32's subnormal range loses precision (and 1/scale overflows): such
    // groups are ~1e-36 and are stored as zero.
    if (!(scale >= FLT_MIN)) scale = 0.0f;
    std::memcpy(out + g * 4, &scale, 4);
    for (int64_t i = 0; i < kFp8Group; ++i) q[g * kFp8Group + i] = scale == 0.0f ? 0 : f32_to_f8_e4m3(v[i] / scale);
  }
}

}  // namespace memra::quant
