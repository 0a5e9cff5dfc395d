#include "plugins/quant-common/gemv_int8_ref.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "repack/quant/block_read.hpp"
#include "repack/quant/dequant.hpp"

namespace memra::ref {
namespace {

using quant::detail::load_f16;

// One unit's update of its partial (see the header), given the activation codes a[32]
// and the block's {d, s}.
float unit_q8_0(const uint8_t* blk, const int8_t* a, const float* ds, float acc) {
  const float dw = load_f16(blk);
  int32_t isum = 0;
  for (int l = 0; l < 32; ++l) isum += static_cast<int32_t>(static_cast<int8_t>(blk[2 + l])) * a[l];
  return std::fmaf(static_cast<float>(isum), dw * ds[0], acc);
}

float unit_q4_0(const uint8_t* blk, const int8_t* a, const float* ds, float acc) {
  const float dw = load_f16(blk);
  const uint8_t* qs = blk + 2;
  int32_t isum = 0;
  for (int l = 0; l < 16; ++l) {
    isum += ((qs[l] & 0x0f) - 8) * a[l];
    isum += ((qs[l] >> 4) - 8) * a[l + 16];
  }
  return std::fmaf(static_cast<float>(isum), dw * ds[0], acc);
}

// Sub-block g's 6-bit scale and min of the 12-byte field Q4_K and Q5_K share.
void k4_scale_min(const uint8_t* s, int g, int* sc, int* mn) {
  if (g < 4) {
    *sc = s[g] & 63;
    *mn = s[g + 4] & 63;
  } else {
    *sc = (s[g + 4] & 0x0f) | ((s[g - 4] >> 6) << 4);
    *mn = (s[g + 4] >> 4) | ((s[g] >> 6) << 4);
  }
}

// Q4_K sub-block g of a super-block (layout as repack/quant/dequant_kquants.cpp).
float unit_q4_k(const uint8_t* sb, int g, const int8_t* a, const float* ds, float acc) {
  const float d = load_f16(sb), dmin = load_f16(sb + 2);
  int sc, mn;
  k4_scale_min(sb + 4, g, &sc, &mn);
  const uint8_t* qs = sb + 16 + 32 * (g / 2);
  const int shift = 4 * (g % 2);
  int32_t isum = 0;
  for (int l = 0; l < 32; ++l) isum += ((qs[l] >> shift) & 0x0f) * a[l];
  const float dw = d * static_cast<float>(sc), mw = dmin * static_cast<float>(mn);
  acc = std::fmaf(dw * static_cast<float>(isum), ds[0], acc);
  return std::fmaf(-mw, ds[1], acc);
}

// Q5_K sub-block g: Q4_K's scales, mins and nibbles plus the fifth bit (bit g of qh[l]);
// layout as repack/quant/dequant_kquants.cpp (d, dmin, scales[12], qh[32], qs[128]).
float unit_q5_k(const uint8_t* sb, int g, const int8_t* a, const float* ds, float acc) {
  const float d = load_f16(sb), dmin = load_f16(sb + 2);
  int sc, mn;
  k4_scale_min(sb + 4, g, &sc, &mn);
  const uint8_t* qh = sb + 16;
  const uint8_t* qs = sb + 48 + 32 * (g / 2);
  const int shift = 4 * (g % 2);
  int32_t isum = 0;
  for (int l = 0; l < 32; ++l) isum += (((qs[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4)) * a[l];
  const float dw = d * static_cast<float>(sc), mw = dmin * static_cast<float>(mn);
  acc = std::fmaf(dw * static_cast<float>(isum), ds[0], acc);
  return std::fmaf(-mw, ds[1], acc);
}

// Q6_K unit g = elements 32g..32g+31 (ql[128], qh[64], int8 scales[16], f16 d): the two
// 16-element halves' integer sums times their int8 scales, added as integers (exact:
// |isum| <= 32 * 32 * 127 * 128 < 2^24, so (float)isum is exact too).
float unit_q6_k(const uint8_t* sb, int g, const int8_t* a, const float* ds, float acc) {
  const uint8_t* ql = sb + 64 * (g / 4) + 32 * (g % 2);
  const uint8_t* qh = sb + 128 + 32 * (g / 4);
  const int lshift = 4 * ((g % 4) / 2), hshift = 2 * (g % 4);
  const auto* sc = reinterpret_cast<const int8_t*>(sb + 192 + 2 * g);
  int32_t half[2] = {0, 0};
  for (int l = 0; l < 32; ++l) {
    const int q = (((ql[l] >> lshift) & 0x0f) | (((qh[l] >> hshift) & 3) << 4)) - 32;
    half[l / 16] += q * a[l];
  }
  const int32_t isum = sc[0] * half[0] + sc[1] * half[1];
  return std::fmaf(static_cast<float>(isum), load_f16(sb + 208) * ds[0], acc);
}

// IQ4_XS sub-block g (f16 d, u16 scales_h, scales_l[4], qs[128]; repack/quant/
// dequant_iq4.cpp): codes kIq4nlValues[nibble], scale ls = 6-bit - 32 folded into the
// integer sum (|isum| <= 32 * 32 * 127 * 127 < 2^24).
float unit_iq4_xs(const uint8_t* sb, int g, const int8_t* a, const float* ds, float acc) {
  const int lo = (sb[4 + g / 2] >> (4 * (g % 2))) & 0x0f;
  const int hi = (quant::detail::load_u16(sb + 2) >> (2 * g)) & 3;
  const int ls = (lo | (hi << 4)) - 32;
  const uint8_t* qs = sb + 8 + 16 * g;
  int32_t dot = 0;
  for (int l = 0; l < 16; ++l) {
    dot += quant::kIq4nlValues[qs[l] & 0x0f] * a[l];
    dot += quant::kIq4nlValues[qs[l] >> 4] * a[l + 16];
  }
  return std::fmaf(static_cast<float>(ls * dot), load_f16(sb) * ds[0], acc);
}

}  // namespace

bool int8_scheme(const std::string& name, Int8Scheme* out) {
  if (name == "q8_0") *out = Int8Scheme::q8_0;
  else if (name == "q4_0") *out = Int8Scheme::q4_0;
  else if (name == "q4_k") *out = Int8Scheme::q4_k;
  else if (name == "q5_k") *out = Int8Scheme::q5_k;
  else if (name == "q6_k") *out = Int8Scheme::q6_k;
  else if (name == "iq4_xs") *out = Int8Scheme::iq4_xs;
  else return false;
  return true;
}

bool int8_activation_matmul(const std::string& scheme, int64_t cols) {
  Int8Scheme s;
  return int8_scheme(scheme, &s) && cols > 0 && cols % 256 == 0;
}

bool bf16_prompt_matmul(const std::string& scheme) {
  for (const char* s : {"bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs", "fp8"})
    if (scheme == s) return true;
  return false;
}

int64_t int8_scheme_row_bytes(Int8Scheme s, int64_t cols) {
  switch (s) {
    case Int8Scheme::q8_0: return cols / 32 * 34;
    case Int8Scheme::q4_0: return cols / 32 * 18;
    case Int8Scheme::q4_k: return cols / 256 * 144;
    case Int8Scheme::q5_k: return cols / 256 * 176;
    case Int8Scheme::q6_k: return cols / 256 * 210;
    case Int8Scheme::iq4_xs: return cols / 256 * 136;
  }
  return 0;
}

bool quantize_act_q8(const float* x, int64_t m, int64_t cols, int8_t* q, float* meta) {
  if (cols <= 0 || cols % kInt8Block != 0) return false;
  const int64_t blocks = m * (cols / kInt8Block);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * kInt8Block;
    int8_t* qb = q + b * kInt8Block;
    float amax = 0.0f;
    for (int i = 0; i < kInt8Block; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    int32_t sum = 0;
    for (int i = 0; i < kInt8Block; ++i) {
      int v = 0;
      if (d != 0.0f) v = static_cast<int>(std::nearbyint(xb[i] / d));  // default mode: ties to even
      v = std::min(127, std::max(-127, v));
      qb[i] = static_cast<int8_t>(v);
      sum += v;
    }
    meta[2 * b] = d;
    meta[2 * b + 1] = d * static_cast<float>(sum);
  }
  return true;
}

bool gemv_int8(Int8Scheme s, const uint8_t* w, int64_t rows, int64_t cols, const int8_t* xq, const float* xmeta,
               int64_t m, const float* bias, float* y) {
  if (cols <= 0 || cols % 256 != 0) return false;
  const int64_t row_bytes = int8_scheme_row_bytes(s, cols), units = cols / kInt8Block;
  std::vector<float> p(kInt8Partials);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* wr = w + r * row_bytes;
    for (int64_t t = 0; t < m; ++t) {
      std::fill(p.begin(), p.end(), 0.0f);
      const int8_t* xt = xq + t * cols;
      const float* mt = xmeta + 2 * t * units;
      for (int64_t u = 0; u < units; ++u) {
        float& acc = p[static_cast<size_t>(u % kInt8Partials)];
        const int8_t* a = xt + 32 * u;
        const float* ds = mt + 2 * u;
        switch (s) {
          case Int8Scheme::q8_0: acc = unit_q8_0(wr + 34 * u, a, ds, acc); break;
          case Int8Scheme::q4_0: acc = unit_q4_0(wr + 18 * u, a, ds, acc); break;
          case Int8Scheme::q4_k: acc = unit_q4_k(wr + 144 * (u / 8), static_cast<int>(u % 8), a, ds, acc); break;
          case Int8Scheme::q5_k: acc = unit_q5_k(wr + 176 * (u / 8), static_cast<int>(u % 8), a, ds, acc); break;
          case Int8Scheme::q6_k: acc = unit_q6_k(wr + 210 * (u / 8), static_cast<int>(u % 8), a, ds, acc); break;
          case Int8Scheme::iq4_xs: acc = unit_iq4_xs(wr + 136 * (u / 8), static_cast<int>(u % 8), a, ds, acc); break;
        }
      }
      // Four warps' xor butterflies (every lane ends with the same sum; lane 0's is taken).
      float wsum[4];
      for (int wi = 0; wi < 4; ++wi) {
        float v[32];
        for (int l = 0; l < 32; ++l) v[l] = p[static_cast<size_t>(32 * wi + l)];
        for (int off = 16; off >= 1; off /= 2) {
          float n[32];
          for (int l = 0; l < 32; ++l) n[l] = v[l] + v[l ^ off];
          std::copy(n, n + 32, v);
        }
        wsum[wi] = v[0];
      }
      float out = ((wsum[0] + wsum[1]) + wsum[2]) + wsum[3];
      if (bias) out = out + bias[r];
      y[t * rows + r] = out;
    }
  }
  return true;
}

}  // namespace memra::ref
