// IQ4_XS (136-byte super-blocks of 256): f16 d, u16 scales_h, u8 scales_l[4], qs[128].
// Sub-block g (32 elements) has a 6-bit scale ls (low 4 bits in nibble g%2 of
// scales_l[g/2], high 2 bits at bit 2g of scales_h) and takes its codes from
// qs[16g..16g+15] (element j low nibble, j+16 high nibble); an element decodes as
// (d * (ls - 32)) * v[q] with v the fixed non-linear iq4_nl codebook (-127 .. 113).
//
// The search mirrors the Q6_K one (quantize_q6_k.cpp), for a codebook code:
//  1. Per sub-block, a continuous signed scale: starts that put the largest-magnitude
//     value a at -127 + {0, +-2, +-4, +-6} (the wider end of the codebook; ggml tries each
//     step of +-7) or at 113 + {0, +-4}, each with its nearest codes refitted once by least
//     squares; the best scale seen is kept. (Every step of +-7, and 113 +- 8 in steps of 2,
//     lower the error by 0.1 % at half the speed.)
//  2. d from candidates that map the largest sub-block scale to -32 (and its float16
//     neighbours), -31, +31 or +30, float16-rounded; each sub-block's scale code is the
//     rounded ratio; the smallest total error wins.
//  3. Each sub-block tries its scale code +-1 .. +-3 and keeps any change that lowers its
//     error.
// ggml weights its search towards large magnitudes (x^2); this one minimises the plain
// squared error, like the other memra quantizers. The codes written are the nearest
// codebook entries for the stored d * (ls - 32).
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
constexpr int kBytes = 136;

// The iq4_nl codebook (ggml's kvalues_iq4nl; the format's definition).
constexpr float kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Nearest codebook index for t in [u/2, (u+1)/2), u = floor(2t) + 256 in [0, 511]. Every
// midpoint between neighbouring entries is a multiple of 1/2, so no such interval
// straddles one: the table is exact (a t on a midpoint is equally near both).
struct NearestTable {
  static constexpr float dist(float a, float b) { return a > b ? a - b : b - a; }
  uint8_t idx[512];
  constexpr NearestTable() : idx{} {
    for (int u = 0; u < 512; ++u) {
      const float t = (static_cast<float>(u - 256) + 0.5f) / 2.0f;
      int best = 0;
      for (int k = 1; k < 16; ++k)
        if (dist(kValues[k], t) < dist(kValues[best], t)) best = k;
      idx[u] = static_cast<uint8_t>(best);
    }
  }
};
constexpr NearestTable kNearest;

inline int nearest(float v, float inv) {
  // 2t + 256 clamped to [0, 511.5]: truncation is floor there.
  const float u = clampf(v * inv * 2.0f + 256.0f, 0.0f, 511.5f);
  return kNearest.idx[static_cast<int>(u)];
}

struct Sums {
  float err = 0.0f;
  float sqq = 0, sxq = 0;
};

// Error of scale s (value = s * v[q]) with the nearest codes; sums for a refit.
Sums evaluate(const float* x, float s) {
  const float inv = s != 0.0f ? 1.0f / s : 0.0f;
  float err[4] = {}, sqq[4] = {}, sxq[4] = {};
  for (int i = 0; i < kSub; i += 4) {
    for (int l = 0; l < 4; ++l) {
      const float q = kValues[nearest(x[i + l], inv)];
      const float e = s * q - x[i + l];
      err[l] += e * e;
      sqq[l] += q * q;
      sxq[l] += x[i + l] * q;
    }
  }
  // Lane sums in a fixed order, as the other quantizers' v4_sum.
  return {((err[0] + err[1]) + err[2]) + err[3], ((sqq[0] + sqq[1]) + sqq[2]) + sqq[3], ((sxq[0] + sxq[1]) + sxq[2]) + sxq[3]};
}

float fit_sub_block(const float* x) {
  float a = 0.0f;
  for (int i = 0; i < kSub; ++i)
    if (std::fabs(x[i]) > std::fabs(a)) a = x[i];
  float best_s = 0.0f;
  // Below 1e-30 (a scale far under float16's smallest d * 1) the block stores as zero;
  // the cut keeps 1/s finite.
  if (!(std::fabs(a) >= 1e-30f)) return best_s;
  float best_err = evaluate(x, 0.0f).err;
  auto start = [&](float m) {
    const float s = a / m;
    const Sums r = evaluate(x, s);
    if (r.err < best_err) best_err = r.err, best_s = s;
    if (!(r.sqq > 0)) return;
    const float s2 = r.sxq / r.sqq;
    const float e = evaluate(x, s2).err;
    if (e < best_err) best_err = e, best_s = s2;
  };
  for (int k = -6; k <= 6; k += 2) start(-127.0f + static_cast<float>(k));
  for (int k = -4; k <= 4; k += 4) start(113.0f + static_cast<float>(k));
  return best_s;
}

struct Choice {
  float d = 0.0f;
  int l[kSubs] = {};  // ls - 32, in [-32, 31]
  float err[kSubs] = {};
  float total = INFINITY;
};

int scale_code(float s, float d) { return d == 0.0f ? 0 : static_cast<int>(round_even(clampf(s / d, -32.0f, 31.0f))); }

bool choose(const float* x, Choice* out) {
  float s[kSubs];
  float smax = 0.0f;
  for (int j = 0; j < kSubs; ++j) {
    s[j] = fit_sub_block(x + j * kSub);
    if (std::fabs(s[j]) > std::fabs(smax)) smax = s[j];
  }
  float cands[8];
  int nc = 0;
  auto add = [&](float v) {
    if (std::isfinite(v) && v != 0.0f && std::find(cands, cands + nc, v) == cands + nc) cands[nc++] = v;
  };
  if (smax != 0.0f) {
    if (!std::isfinite(f16_round(smax / -32.0f))) return false;
    const uint16_t h0 = f32_to_fp16(smax / -32.0f);
    for (int k = -1; k <= 1; ++k) {
      const int mag = static_cast<int>(h0 & 0x7fff) + k;
      if (mag > 0 && mag < 0x7c00) add(fp16_to_f32(static_cast<uint16_t>((h0 & 0x8000) | mag)));
    }
    for (const float c : {-31.0f, 31.0f, 30.0f}) add(f16_round(smax / c));
  }
  if (nc == 0) cands[nc++] = 0.0f;  // all zero, or scales below float16's range (values ~1e-9)
  Choice best;
  for (int a = 0; a < nc; ++a) {
    Choice c;
    c.d = cands[a], c.total = 0.0f;
    for (int j = 0; j < kSubs; ++j) {
      c.l[j] = scale_code(s[j], c.d);
      c.err[j] = evaluate(x + j * kSub, c.d * static_cast<float>(c.l[j])).err;
      c.total += c.err[j];
    }
    if (c.total < best.total) best = c;
  }
  for (int j = 0; j < kSubs; ++j) {
    const int l0 = best.l[j];
    for (int dl = -3; dl <= 3; ++dl) {
      const int l = l0 + dl;
      if (dl == 0 || l < -32 || l > 31) continue;
      const float e = evaluate(x + j * kSub, best.d * static_cast<float>(l)).err;
      if (e < best.err[j]) best.err[j] = e, best.l[j] = l;
    }
  }
  *out = best;
  return true;
}

}  // namespace

bool quantize_iq4_xs(const float* x, void* dst, int64_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / kSuper; ++b, x += kSuper, out += kBytes) {
    Choice c;
    if (!choose(x, &c)) return false;
    std::fill(out, out + kBytes, uint8_t{0});
    detail::store_f16(out, c.d);
    uint16_t scales_h = 0;
    uint8_t* scales_l = out + 4;
    uint8_t* qs = out + 8;
    for (int j = 0; j < kSubs; ++j) {
      const int ls = c.l[j] + 32;  // 0..63
      scales_l[j / 2] = static_cast<uint8_t>(scales_l[j / 2] | ((ls & 0x0f) << (4 * (j % 2))));
      scales_h = static_cast<uint16_t>(scales_h | ((ls >> 4) << (2 * j)));
      const float dl = c.d * static_cast<float>(c.l[j]);
      const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
      const float* xs = x + j * kSub;
      for (int i = 0; i < kSub / 2; ++i)
        qs[16 * j + i] = static_cast<uint8_t>(nearest(xs[i], inv) | (nearest(xs[i + 16], inv) << 4));
    }
    detail::store_u16(out + 2, scales_h);
  }
  return true;
}

}  // namespace memra::quant
