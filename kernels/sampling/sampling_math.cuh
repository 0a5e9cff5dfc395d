// The arithmetic of the canonical sampler, shared word for word by the CUDA kernel
// (kernels/sampling/sampling.cu) and its CPU reference (sampling_ref.cpp), so both
// compute the same bits: every float operation is one IEEE-rounded add, subtract,
// multiply or divide (__fadd_rn & co. on the device; plain operators on the host,
// compiled with -ffp-contract=off and without fast-math). See sampling_ref.hpp for
// the algorithm and docs/ARCHITECTURE.md ("Sampling") for the contract.
#pragma once

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define MEMRA_SAMPLING_HD __host__ __device__ __forceinline__
#else
#define MEMRA_SAMPLING_HD inline
#endif

namespace memra::sampling {

// The canonical sum: lane j (of kLanes) adds the values of indices j, j+kLanes, ...
// in increasing order from +0; warp w adds its 32 lanes' partials in lane order;
// the total adds the 32 warp sums in warp order. The CUDA kernel runs one block of
// kLanes threads per row, so lane = thread.
constexpr int kLanes = 1024;
constexpr int kWarps = kLanes / 32;

// A penalty entry of one row: a token of the sequence's history.
struct PenaltyEntry {
  int32_t id;
  int32_t count;  // (occurrences in the output << 1) | 1 when the token is in prompt or output
};

// A logit_bias entry of one row (step 0): logit + bias, one IEEE add on the raw logit.
struct BiasEntry {
  int32_t id;
  float bias;
};

struct RowParams {
  float temperature;         // 0: argmax
  int32_t top_k;             // <= 0 or >= vocab: off
  float top_p;               // >= 1: off
  float min_p;               // <= 0: off
  float repetition_penalty;  // 1: off
  float presence_penalty;
  float frequency_penalty;
  uint32_t pad;
  uint64_t seed;
  uint64_t position;
};

MEMRA_SAMPLING_HD float f_add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MEMRA_SAMPLING_HD float f_sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
MEMRA_SAMPLING_HD float f_mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MEMRA_SAMPLING_HD float f_div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

MEMRA_SAMPLING_HD uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
#endif
}
MEMRA_SAMPLING_HD float bits_float(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  memcpy(&x, &u, 4);
  return x;
#endif
}

// A logit as the sampler sees it: NaN becomes -inf and -0 becomes +0, so the
// order-preserving key below orders values exactly as float comparison does.
MEMRA_SAMPLING_HD float canonical(float x) {
  if (!(x == x)) return bits_float(0xff800000u);  // NaN -> -inf
  if (x == 0.0f) return 0.0f;
  return x;
}

// Order-preserving key of a canonical float: a > b  <=>  key(a) > key(b).
MEMRA_SAMPLING_HD uint32_t order_key(float x) {
  const uint32_t u = float_bits(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// exp(x) from IEEE-rounded adds and multiplies only (no fma, no library call):
// n = round(x / ln 2) by the 1.5 * 2^23 trick, r = x - n ln2 (Cody-Waite, the high
// part exact by Sterbenz), exp(r) by a degree-7 Taylor polynomial in Horner form on
// |r| <= 0.35, times 2^n built from exponent bits (two steps near the ends of the
// range). Within 2 ulp of the true exp for normal results (tests/sampling sweeps it
// against std::exp); 0 below -104, +inf above 88.72; NaN stays NaN.
MEMRA_SAMPLING_HD float memra_exp(float x) {
  if (!(x == x)) return x;
  if (x < -104.0f) return 0.0f;
  if (x > 88.72283935546875f) return bits_float(0x7f800000u);
  const float kLog2e = 1.44269502162933349609375f;
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = f_add(f_mul(x, kLog2e), kShift);
  const float nf = f_sub(t, kShift);
  const float kLn2Hi = 0.693145751953125f;         // 0x3f317200: n * kLn2Hi is exact for |n| < 512
  const float kLn2Lo = 1.428606765330187045e-06f;  // ln 2 - kLn2Hi
  float r = f_sub(x, f_mul(nf, kLn2Hi));
  r = f_sub(r, f_mul(nf, kLn2Lo));
  // 1 + r + r^2/2! + ... + r^7/7!
  float p = 1.98412698412698412698e-4f;
  p = f_add(f_mul(p, r), 1.38888888888888888889e-3f);
  p = f_add(f_mul(p, r), 8.33333333333333333333e-3f);
  p = f_add(f_mul(p, r), 4.16666666666666666667e-2f);
  p = f_add(f_mul(p, r), 1.66666666666666666667e-1f);
  p = f_add(f_mul(p, r), 0.5f);
  p = f_add(f_mul(p, r), 1.0f);
  p = f_add(f_mul(p, r), 1.0f);
  const int32_t n = static_cast<int32_t>(nf);
  if (n < -126) return f_mul(f_mul(p, bits_float(static_cast<uint32_t>(n + 64 + 127) << 23)), bits_float(static_cast<uint32_t>(-64 + 127) << 23));
  if (n > 127) return f_mul(f_mul(p, bits_float(static_cast<uint32_t>(n - 1 + 127) << 23)), 2.0f);
  return f_mul(p, bits_float(static_cast<uint32_t>(n + 127) << 23));
}

// Penalties of one history token on its logit (canonical in, canonical out): HF
// repetition penalty when the token is in prompt or output, then OpenAI presence and
// frequency penalties for its occurrences in the output. The formulas of the old
// host sampler.
MEMRA_SAMPLING_HD float apply_penalty(float v, int32_t count, const RowParams& p) {
  if ((count & 1) && p.repetition_penalty != 1.0f)
    v = v > 0.0f ? f_div(v, p.repetition_penalty) : f_mul(v, p.repetition_penalty);
  const int32_t n = count >> 1;
  if (n > 0 && (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f))
    v = f_sub(v, f_add(p.presence_penalty, f_mul(p.frequency_penalty, static_cast<float>(n))));
  return canonical(v);
}

// Unnormalised probability of a candidate with (canonical, penalised) value v when
// the row's maximum is mx: 1 at the maximum (also when mx is infinite), else
// exp((v - mx) / T), never above 1.
MEMRA_SAMPLING_HD float candidate_weight(float v, float mx, float temperature) {
  if (v == mx) return 1.0f;
  const float e = memra_exp(f_div(f_sub(v, mx), temperature));
  return e > 1.0f ? 1.0f : e;
}

// Philox4x32-10, the same function as host/engine/philox.hpp (tests compare them).
MEMRA_SAMPLING_HD void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * ctr[2];
    const uint32_t c0 = static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0;
    const uint32_t c1 = static_cast<uint32_t>(p1);
    const uint32_t c2 = static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1;
    const uint32_t c3 = static_cast<uint32_t>(p0);
    ctr[0] = c0;
    ctr[1] = c1;
    ctr[2] = c2;
    ctr[3] = c3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// philox_uniform(seed, position) of host/engine/philox.hpp: 24 bits in [0, 1).
MEMRA_SAMPLING_HD float philox_uniform(uint64_t seed, uint64_t position) {
  uint32_t c[4] = {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), 0u, 0u};
  philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return f_mul(static_cast<float>(c[0] >> 8), 5.9604644775390625e-08f);
}

}  // namespace memra::sampling
