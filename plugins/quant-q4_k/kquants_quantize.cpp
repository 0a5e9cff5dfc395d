// Q4_K and Q5_K: 256-element super-blocks of eight 32-element sub-blocks. Each sub-block
// has a 6-bit scale sc and a 6-bit min mn; the super-block stores float16 d and dmin, and
// an element decodes as (d*sc)*q - (dmin*mn) with q in [0, 15] (Q4_K) or [0, 31] (Q5_K).
//
// The search, in three steps, each scored by the plain squared error of the decoded values:
//  1. Per sub-block, a continuous (scale, min) pair: from nine starting scales that map
//     [min(x, 0), max(x)] onto one step fewer to one step more than the code range, take
//     the best codes for each, then the least-squares (scale, min) for those codes (min
//     kept >= 0, scale >= 0), and keep the best pair seen.
//  2. Per super-block, d and dmin from a few candidates around max(scale)/63 and
//     max(min)/63, each rounded to float16 first; every sub-block's sc, mn is the rounded
//     ratio, and the pair with the smallest total error wins.
//  3. Coordinate refinement: each sub-block tries sc +-1 and mn +-1 (with the codes
//     re-chosen for each) and keeps any change that lowers its error.
// The codes written are always the optimal ones for the stored (d*sc, dmin*mn).
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
constexpr int kSub = 32;
constexpr int kSubs = kSuper / kSub;

struct Sums {
  float err = 0.0f;
  float sq = 0, sqq = 0, sxq = 0;
};

// Error of sub-block x with value = s*q - m and the best q for them; also the sums
// the least-squares refit needs.
Sums evaluate(const float* x, float s, float m, float nmax) {
  using detail::v4f;
  const v4f inv = detail::v4_splat(s > 0.0f ? 1.0f / s : 0.0f), sv = detail::v4_splat(s), mv = detail::v4_splat(m);
  const v4f lo = detail::v4_splat(0.0f), hi = detail::v4_splat(nmax);
  v4f err = {}, sq = {}, sqq = {}, sxq = {};
  for (int i = 0; i < kSub; i += 4) {
    const v4f v = detail::v4_load(x + i);
    const v4f q = detail::v4_round_even(detail::v4_clamp((v + mv) * inv, lo, hi));
    const v4f e = sv * q - mv - v;
    err += e * e;
    sq += q;
    sqq += q * q;
    sxq += v * q;
  }
  return {detail::v4_sum(err), detail::v4_sum(sq), detail::v4_sum(sqq), detail::v4_sum(sxq)};
}

// Least-squares scale and min for fixed codes, with min >= 0 and scale >= 0.
// Returns false when the codes are all equal (no information about the scale).
bool refit(const Sums& r, double sx, float* s, float* m) {
  const double n = kSub;
  const double det = static_cast<double>(r.sqq) * n - static_cast<double>(r.sq) * r.sq;
  if (!(det > 0)) return false;
  double scale = (n * r.sxq - static_cast<double>(r.sq) * sx) / det;
  double offset = (static_cast<double>(r.sqq) * sx - static_cast<double>(r.sq) * r.sxq) / det;  // value = scale*q + offset
  if (offset > 0) {
    offset = 0;
    scale = r.sqq > 0 ? static_cast<double>(r.sxq) / r.sqq : 0;
  }
  if (scale < 0) {
    scale = 0;
    offset = std::min(0.0, sx / n);
  }
  *s = static_cast<float>(scale);
  *m = static_cast<float>(-offset);
  return true;
}

void fit_sub_block(const float* x, float nmax, float* best_s, float* best_m) {
  float lo = 0.0f, hi = x[0];
  double sx = 0;
  for (int i = 0; i < kSub; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sx += x[i];
  }
  *best_s = 0.0f;
  *best_m = -lo;
  if (!(hi > lo)) return;  // every value equals lo <= 0: the min alone represents it
  float best_err = evaluate(x, 0.0f, -lo, nmax).err;
  // Starting scales map [lo, hi] onto nmax-1 .. nmax+1 steps; each start is refined once
  // by least squares on its codes.
  for (int k = 0; k <= 8; ++k) {
    const float s = (hi - lo) / (nmax - 1.0f + 0.25f * static_cast<float>(k));
    const Sums r = evaluate(x, s, -lo, nmax);
    if (r.err < best_err) best_err = r.err, *best_s = s, *best_m = -lo;
    float s2, m2;
    if (!refit(r, sx, &s2, &m2)) continue;
    const float e = evaluate(x, s2, m2, nmax).err;
    if (e < best_err) best_err = e, *best_s = s2, *best_m = m2;
  }
}

struct Choice {
  float d = 0.0f, dmin = 0.0f;
  int sc[kSubs] = {}, mn[kSubs] = {};
  float err[kSubs] = {};
  float total = INFINITY;
};

// Candidate float16 super-scales for a maximum sub-block value `mx`.
int super_candidates(float mx, float out[4]) {
  if (!(mx > 0.0f)) {
    out[0] = 0.0f;
    return 1;
  }
  int n = 0;
  for (const float c : {63.5f, 62.75f, 62.0f}) {
    const float v = f16_round(mx / c);
    if (!std::isfinite(v)) continue;
    if (std::find(out, out + n, v) == out + n) out[n++] = v;
  }
  return n;
}

int ratio_code(float v, float unit) { return unit > 0.0f ? static_cast<int>(round_even(clampf(v / unit, 0.0f, 63.0f))) : 0; }

// Quantizes one super-block; false when a scale overflows float16.
bool choose(const float* x, float nmax, Choice* out) {
  float s[kSubs], m[kSubs];
  float smax = 0.0f, mmax = 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    fit_sub_block(x + j * kSub, nmax, &s[j], &m[j]);
    smax = std::max(smax, s[j]);
    mmax = std::max(mmax, m[j]);
  }
  float dc[4], mc[4];
  const int nd = super_candidates(smax, dc), nm = super_candidates(mmax, mc);
  if (nd == 0 || nm == 0) return false;
  Choice best;
  for (int a = 0; a < nd; ++a) {
    for (int b = 0; b < nm; ++b) {
      Choice c;
      c.d = dc[a], c.dmin = mc[b], c.total = 0.0f;
      for (int j = 0; j < kSubs; ++j) {
        c.sc[j] = ratio_code(s[j], c.d);
        c.mn[j] = ratio_code(m[j], c.dmin);
        c.err[j] = evaluate(x + j * kSub, c.d * static_cast<float>(c.sc[j]), c.dmin * static_cast<float>(c.mn[j]), nmax).err;
        c.total += c.err[j];
      }
      if (c.total < best.total) best = c;
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    bool changed = false;
    for (int j = 0; j < kSubs; ++j) {
      const int sc0 = best.sc[j], mn0 = best.mn[j];
      for (int ds = -1; ds <= 1; ++ds) {
        for (int dm = -1; dm <= 1; ++dm) {
          const int sc = sc0 + ds, mn = mn0 + dm;
          if ((ds == 0 && dm == 0) || sc < 0 || sc > 63 || mn < 0 || mn > 63) continue;
          const float e = evaluate(x + j * kSub, best.d * static_cast<float>(sc), best.dmin * static_cast<float>(mn), nmax).err;
          if (e < best.err[j]) best.err[j] = e, best.sc[j] = sc, best.mn[j] = mn, changed = true;
        }
      }
    }
    if (!changed) break;
  }
  *out = best;
  return true;
}

// The 12-byte scale/min field (inverse of the dequantizer's unpack_scale_min_k4).
void pack_scale_min(const int sc[8], const int mn[8], uint8_t* p) {
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((mn[j + 4] & 0x0f) << 4));
  }
}

// Final codes for the stored scales, q[256] in element order.
void final_codes(const float* x, const Choice& c, float nmax, uint8_t* q) {
  for (int j = 0; j < kSubs; ++j) {
    const float s = c.d * static_cast<float>(c.sc[j]);
    const float m = c.dmin * static_cast<float>(c.mn[j]);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < kSub; ++i) {
      const float v = s > 0.0f ? round_even(clampf((x[j * kSub + i] + m) * inv, 0.0f, nmax)) : 0.0f;
      q[j * kSub + i] = static_cast<uint8_t>(v);
    }
  }
}

}  // namespace

bool quantize_q4_k(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, out += 144) {
    Choice c;
    if (!choose(x, 15.0f, &c)) return false;
    uint8_t q[kSuper];
    final_codes(x, c, 15.0f, q);
    detail::store_f16(out, c.d);
    detail::store_f16(out + 2, c.dmin);
    pack_scale_min(c.sc, c.mn, out + 4);
    uint8_t* qs = out + 16;
    for (int ch = 0; ch < 4; ++ch)  // sub-blocks 2ch (low nibble) and 2ch+1 (high nibble)
      for (int l = 0; l < kSub; ++l)
        qs[32 * ch + l] = static_cast<uint8_t>(q[64 * ch + l] | (q[64 * ch + 32 + l] << 4));
  }
  return true;
}

bool quantize_q5_k(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, out += 176) {
    Choice c;
    if (!choose(x, 31.0f, &c)) return false;
    uint8_t q[kSuper];
    final_codes(x, c, 31.0f, q);
    detail::store_f16(out, c.d);
    detail::store_f16(out + 2, c.dmin);
    pack_scale_min(c.sc, c.mn, out + 4);
    uint8_t* qh = out + 16;
    uint8_t* qs = out + 48;
    for (int l = 0; l < kSub; ++l) {
      uint8_t h = 0;
      for (int g = 0; g < kSubs; ++g) h = static_cast<uint8_t>(h | (((q[32 * g + l] >> 4) & 1) << g));
      qh[l] = h;
    }
    for (int ch = 0; ch < 4; ++ch)
      for (int l = 0; l < kSub; ++l)
        qs[32 * ch + l] = static_cast<uint8_t>((q[64 * ch + l] & 0x0f) | ((q[64 * ch + 32 + l] & 0x0f) << 4));
  }
  return true;
}

}  // namespace memra::quant
