// Q4_0 (18-byte blocks of 32): f16 d, then 16 bytes of nibbles (element j in the low
// nibble of byte j, element j+16 in the high one); y = d * (q - 8), q in [0, 15].
//
// ggml's reference maps the largest-magnitude value a onto code 0 (d = a / -8) and rounds
// the others. Here that scale is one candidate among several, each scored by the squared
// error of its optimal codes under the stored float16 scale:
//  1. starts that put a at -8.5 .. -6 (the wider side of the code range) or at +6.5 .. +7.5,
//     each refitted once by least squares on its codes;
//  2. the float16 neighbours (+-1, +-2 steps) of the best scale so far.
// Since a / -8 (float16-rounded) is scored with codes optimal for it, a block is never
// worse than ggml's; a block already on the grid (a at code 0 or 15) comes back exactly.
#include <cmath>

#include "plugins/quant-common/quantize.hpp"
#include "plugins/quant-common/quantize_internal.hpp"

namespace memra::quant {
namespace {

using detail::clampf;
using detail::f16_round;
using detail::round_even;

constexpr int kBlock = 32;
constexpr int kBytes = 18;

struct Sums {
  float err = 0.0f;
  float sqq = 0, sxq = 0;
};

// Codes k = q - 8 in [-8, 7] for scale d, as the final codes are chosen.
Sums evaluate(const float* x, float d) {
  using detail::v4f;
  const v4f inv = detail::v4_splat(d != 0.0f ? 1.0f / d : 0.0f), dv = detail::v4_splat(d);
  const v4f lo = detail::v4_splat(-8.0f), hi = detail::v4_splat(7.0f);
  v4f err = {}, sqq = {}, sxq = {};
  for (int i = 0; i < kBlock; i += 4) {
    const v4f v = detail::v4_load(x + i);
    const v4f k = detail::v4_round_even(detail::v4_clamp(v * inv, lo, hi));
    const v4f e = dv * k - v;
    err += e * e;
    sqq += k * k;
    sxq += v * k;
  }
  return {detail::v4_sum(err), detail::v4_sum(sqq), detail::v4_sum(sxq)};
}

struct Best {
  float d = 0.0f, err = INFINITY;
  // Scores the float16 value of `s`; returns its sums for a refit.
  Sums offer(const float* x, float s) {
    const float d16 = f16_round(s);
    if (!std::isfinite(d16)) return {};
    const Sums r = evaluate(x, d16);
    if (r.err < err) err = r.err, d = d16;
    return r;
  }
};

// The stored (float16) scale of one block; false when it overflows float16.
bool choose(const float* x, float* out) {
  float a = 0.0f;
  for (int i = 0; i < kBlock; ++i)
    if (std::fabs(x[i]) > std::fabs(a)) a = x[i];
  *out = 0.0f;
  if (a == 0.0f) return true;
  if (!std::isfinite(f16_round(a / -8.0f))) return false;
  Best best;
  best.offer(x, 0.0f);
  auto start = [&](float m) {
    const Sums r = best.offer(x, a / m);
    if (r.sqq > 0) best.offer(x, r.sxq / r.sqq);
  };
  for (int k = 0; k <= 10; ++k) start(-8.5f + 0.25f * static_cast<float>(k));
  for (int k = 0; k <= 4; ++k) start(6.5f + 0.25f * static_cast<float>(k));
  // float16 codes of one sign are ordered like their magnitudes: +-k steps are neighbours.
  const uint16_t h0 = f32_to_fp16(best.d);
  for (int k = -2; k <= 2; ++k) {
    const int mag = static_cast<int>(h0 & 0x7fff) + k;
    if (k == 0 || mag <= 0 || mag >= 0x7c00) continue;
    best.offer(x, fp16_to_f32(static_cast<uint16_t>((h0 & 0x8000) | mag)));
  }
  *out = best.d;
  return true;
}

}  // namespace

bool quantize_q4_0(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, out += kBytes) {
    float d;
    if (!choose(x, &d)) return false;
    detail::store_f16(out, d);
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t q[kBlock];
    for (int i = 0; i < kBlock; ++i) q[i] = static_cast<uint8_t>(round_even(clampf(x[i] * inv, -8.0f, 7.0f)) + 8.0f);
    for (int j = 0; j < kBlock / 2; ++j) out[2 + j] = static_cast<uint8_t>(q[j] | (q[j + 16] << 4));
  }
  return true;
}

}  // namespace memra::quant
