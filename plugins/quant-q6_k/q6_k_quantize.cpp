// Q6_K: 256-element super-blocks of sixteen 16-element sub-blocks; an element decodes as
// (d * sc) * q with float16 d, an int8 sub-block scale sc and q in [-32, 31].
//
// The search mirrors the Q4_K/Q5_K one (see quantize_kquants.cpp), for a symmetric code:
//  1. Per sub-block, a continuous signed scale: starting scales map the largest-magnitude
//     value near -32 (the wider side of the code range) or near +31; each start's codes
//     are refitted once by least squares, and the best scale seen is kept.
//  2. d from candidates that map the largest sub-block scale to about -128 or +127
//     (rounded to float16 first); sc = the rounded ratio; smallest total error wins.
//  3. Each sub-block tries sc +-1, +-2 and keeps any change that lowers its error.
#include <algorithm>
#include <cmath>

#include "plugins/quant-common/quantize.hpp"
#include "plugins/quant-common/quantize_internal.hpp"

namespace memra::quant {
namespace {

using detail::clampf;
using detail::f16_round;
using detail::round_even;

constexpr int kSuper = 256;
constexpr int kSub = 16;
constexpr int kSubs = kSuper / kSub;

struct Sums {
  float err = 0.0f;
  float sqq = 0, sxq = 0;
};

// The error of scale s with its best codes, and the sums for the least-squares refit.
Sums evaluate(const float* x, float s) {
  using detail::v4f;
  const v4f inv = detail::v4_splat(s != 0.0f ? 1.0f / s : 0.0f), sv = detail::v4_splat(s);
  const v4f lo = detail::v4_splat(-32.0f), hi = detail::v4_splat(31.0f);
  v4f err = {}, sqq = {}, sxq = {};
  for (int i = 0; i < kSub; i += 4) {
    const v4f v = detail::v4_load(x + i);
    const v4f q = detail::v4_round_even(detail::v4_clamp(v * inv, lo, hi));
    const v4f e = sv * q - v;
    err += e * e;
    sqq += q * q;
    sxq += v * q;
  }
  return {detail::v4_sum(err), detail::v4_sum(sqq), detail::v4_sum(sxq)};
}

float fit_sub_block(const float* x) {
  float a = 0.0f;
  for (int i = 0; i < kSub; ++i)
    if (std::fabs(x[i]) > std::fabs(a)) a = x[i];
  float best_s = 0.0f;
  if (a == 0.0f) return best_s;
  float best_err = evaluate(x, 0.0f).err;
  // Starts that put the largest magnitude near -32 (the wider side) or +31, each
  // refined once by least squares on its codes.
  for (int k = 0; k <= 6; ++k) {
    const float delta = -0.75f + 0.25f * static_cast<float>(k);
    for (const float start : {-a / (32.0f + delta), a / (31.0f + delta)}) {
      const Sums r = evaluate(x, start);
      if (r.err < best_err) best_err = r.err, best_s = start;
      if (!(r.sqq > 0)) continue;
      const float s2 = r.sxq / r.sqq;
      const float e = evaluate(x, s2).err;
      if (e < best_err) best_err = e, best_s = s2;
    }
  }
  return best_s;
}

struct Choice {
  float d = 0.0f;
  int sc[kSubs] = {};
  float err[kSubs] = {};
  float total = INFINITY;
};

int scale_code(float s, float d) {
  return d == 0.0f ? 0 : static_cast<int>(round_even(clampf(s / d, -128.0f, 127.0f)));
}

bool choose(const float* x, Choice* out) {
  float s[kSubs];
  float smax = 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    s[j] = fit_sub_block(x + j * kSub);
    if (std::fabs(s[j]) > std::fabs(smax)) smax = s[j];
  }
  float cands[8];
  int nc = 0;
  if (smax == 0.0f) {
    cands[nc++] = 0.0f;
  } else {
    for (const float c : {-128.0f, -127.0f, 127.0f, 126.0f}) {
      const float v = f16_round(smax / c);
      if (std::isfinite(v) && v != 0.0f && std::find(cands, cands + nc, v) == cands + nc) cands[nc++] = v;
    }
    if (nc == 0) {
      if (std::isfinite(f16_round(smax / 127.0f))) cands[nc++] = 0.0f;  // underflow: values ~1e-10
      else return false;
    }
  }
  Choice best;
  for (int a = 0; a < nc; ++a) {
    Choice c;
    c.d = cands[a], c.total = 0.0f;
    for (int j = 0; j < kSubs; ++j) {
      c.sc[j] = scale_code(s[j], c.d);
      c.err[j] = evaluate(x + j * kSub, c.d * static_cast<float>(c.sc[j])).err;
      c.total += c.err[j];
    }
    if (c.total < best.total) best = c;
  }
  for (int pass = 0; pass < 2; ++pass) {
    bool changed = false;
    for (int j = 0; j < kSubs; ++j) {
      const int sc0 = best.sc[j];
      for (int ds = -2; ds <= 2; ++ds) {
        const int sc = sc0 + ds;
        if (ds == 0 || sc < -128 || sc > 127) continue;
        const float e = evaluate(x + j * kSub, best.d * static_cast<float>(sc)).err;
        if (e < best.err[j]) best.err[j] = e, best.sc[j] = sc, changed = true;
      }
    }
    if (!changed) break;
  }
  *out = best;
  return true;
}

}  // namespace

bool quantize_q6_k(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, out += 210) {
    Choice c;
    if (!choose(x, &c)) return false;
    uint8_t* ql = out;
    uint8_t* qh = out + 128;
    auto* scales = reinterpret_cast<int8_t*>(out + 192);
    std::fill(out, out + 192, uint8_t{0});
    for (int j = 0; j < kSubs; ++j) scales[j] = static_cast<int8_t>(c.sc[j]);
    detail::store_f16(out + 208, c.d);
    for (int e = 0; e < kSuper; ++e) {
      const float s = c.d * static_cast<float>(c.sc[e / kSub]);
      const float q = s == 0.0f ? 0.0f : round_even(clampf(x[e] * (1.0f / s), -32.0f, 31.0f));
      const int u = static_cast<int>(q) + 32;  // 0..63
      const int h = e / 128, r = e % 128;
      ql[64 * h + r % 64] = static_cast<uint8_t>(ql[64 * h + r % 64] | ((u & 0x0f) << (4 * (r / 64))));
      qh[32 * h + r % 32] = static_cast<uint8_t>(qh[32 * h + r % 32] | ((u >> 4) << (2 * (r / 32))));
    }
  }
  return true;
}

}  // namespace memra::quant
