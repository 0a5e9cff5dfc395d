// Q8_0 (34-byte blocks of 32): f16 d, int8 q[32]; y = q * d.
//
// The scale is chosen among the float16 values around amax/127 (the one that maps the
// largest magnitude to 127, and its neighbours): each candidate is scored with the codes
// that are optimal for that exact stored scale (x / d rounded, clamped to [-127, 127]),
// and the smallest squared error wins. Scoring against the stored float16 scale — not
// the float32 one it came from — is what makes this never worse than quantizing with
// amax/127 directly.
#include <cmath>

#include "plugins/quant-common/quantize.hpp"
#include "plugins/quant-common/quantize_internal.hpp"

namespace memra::quant {
namespace {

using detail::clampf;
using detail::round_even;

constexpr int kBlock = 32;
constexpr int kBytes = 34;

float block_error(const float* x, float d) {
  float err = 0.0f;
  if (d == 0.0f) {
    for (int i = 0; i < kBlock; ++i) err += x[i] * x[i];
    return err;
  }
  for (int i = 0; i < kBlock; ++i) {
    const float q = round_even(clampf(x[i] / d, -127.0f, 127.0f));
    const float e = q * d - x[i];
    err += e * e;
  }
  return err;
}

}  // namespace

bool quantize_q8_0(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, out += kBytes) {
    float amax = 0.0f;
    for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    uint16_t best_h = 0;
    float best_d = 0.0f;
    if (amax > 0.0f) {
      const uint16_t h0 = f32_to_fp16(amax / 127.0f);
      if (!std::isfinite(fp16_to_f32(h0))) return false;
      float best_err = INFINITY;
      // Positive float16 codes are ordered like their values: +-k steps are neighbours.
      for (int k = -2; k <= 2; ++k) {
        const int h = static_cast<int>(h0) + k;
        if (h <= 0 || h >= 0x7c00) continue;
        const float d = fp16_to_f32(static_cast<uint16_t>(h));
        const float err = block_error(x, d);
        if (err < best_err) best_err = err, best_h = static_cast<uint16_t>(h), best_d = d;
      }
    }
    detail::store_u16(out, best_h);
    for (int i = 0; i < kBlock; ++i) {
      const float q = best_d == 0.0f ? 0.0f : round_even(clampf(x[i] / best_d, -127.0f, 127.0f));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
  return true;
}

}  // namespace memra::quant
