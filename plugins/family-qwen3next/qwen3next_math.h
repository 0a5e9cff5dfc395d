// The scalar arithmetic the family's ops share between their CPU references
// (qwen3next_ops.cpp) and their CUDA kernels (qwen3next_kernels.cu): exp, log1p and the
// activations built on them from f32 operations that round the same way on both (each
// +, *, /, sqrt correctly rounded; both sides compiled without contraction), so a kernel
// is bitwise its reference. Accuracy: exp and log1p within a few ulp of the true value.
#ifndef MEMRA_QWEN3NEXT_MATH_H
#define MEMRA_QWEN3NEXT_MATH_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define Q3N_HD __host__ __device__ inline
#else
#define Q3N_HD inline
#endif

Q3N_HD float q3n_bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
Q3N_HD uint32_t q3n_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// e^x: x = n ln2 + r (Cody-Waite, |r| <= ln2 / 2), e^r by its Taylor series to r^8 / 8!.
Q3N_HD float q3n_exp(float x) {
  if (!(x == x)) return x;
  if (x > 88.7228f) return q3n_bits_float(0x7f800000u);
  if (x < -103.9f) return 0.0f;
  const float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269502162933349609375f + kShift;
  const float nf = t - kShift;
  float r = x - nf * 0.693145751953125f;  // ln2's upper bits: nf * them is exact
  r = r - nf * 1.428606765330187045e-06f;
  float p = 2.48015873015873016e-5f;
  p = p * r + 1.98412698412698413e-4f;
  p = p * r + 1.38888888888888889e-3f;
  p = p * r + 8.33333333333333333e-3f;
  p = p * r + 4.16666666666666667e-2f;
  p = p * r + 1.66666666666666667e-1f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t n = (int32_t)nf;
  if (n < -126) return (p * q3n_bits_float((uint32_t)(n + 64 + 127) << 23)) * q3n_bits_float((uint32_t)(127 - 64) << 23);
  if (n > 127) return (p * q3n_bits_float((uint32_t)(n - 1 + 127) << 23)) * 2.0f;
  return p * q3n_bits_float((uint32_t)(n + 127) << 23);
}

// log(1 + y) for y in [0, 1]: u = 1 + y, log u from atanh's series in s = (u-1)/(u+1)
// after halving u past sqrt 2, scaled by y / (u - 1) for the rounding of 1 + y.
Q3N_HD float q3n_log1p01(float y) {
  const float u = 1.0f + y;
  if (u == 1.0f) return y;
  float f = u, e = 0.0f;
  if (f > 1.41421356f) {
    f = f * 0.5f;
    e = 1.0f;
  }
  const float s = (f - 1.0f) / (f + 1.0f);
  const float s2 = s * s;
  float p = 0.153846153846153846f;  // 2/13
  p = p * s2 + 0.181818181818181818f;
  p = p * s2 + 0.222222222222222222f;
  p = p * s2 + 0.285714285714285714f;
  p = p * s2 + 0.4f;
  p = p * s2 + 0.666666666666666667f;
  p = p * s2 + 2.0f;
  const float log_u = (s * p + e * 1.428606765330187045e-06f) + e * 0.693145751953125f;
  return log_u * (y / (u - 1.0f));
}

// The order of every sum the DeltaNet op takes over a head (q/k norms, Sᵀk, Sᵀq, the gated
// RMSNorm), as a warp of 32 lanes takes it: lane l adds the terms i = l, l + 32, l + 64, ...
// (i < n) in that order from 0, then the lanes' sums meet by xor butterfly (offsets 16, 8, 4,
// 2, 1: lane l adds lane l ^ offset's sum to its own), which leaves every lane the same value.
// q3n_butterfly is that last part over the 32 lane sums p (destroyed), for the CPU reference.
#define Q3N_LANES 32
Q3N_HD float q3n_butterfly(float* p) {
  for (int off = 16; off >= 1; off >>= 1) {
    float n[Q3N_LANES];
    for (int l = 0; l < Q3N_LANES; ++l) n[l] = p[l] + p[l ^ off];
    for (int l = 0; l < Q3N_LANES; ++l) p[l] = n[l];
  }
  return p[0];
}

Q3N_HD float q3n_sigmoid(float x) { return 1.0f / (1.0f + q3n_exp(-x)); }
Q3N_HD float q3n_silu(float x) { return x / (1.0f + q3n_exp(-x)); }
// log(1 + e^x), x itself past 20 (as torch's softplus).
Q3N_HD float q3n_softplus(float x) {
  if (x > 20.0f) return x;
  const float m = x > 0.0f ? x : 0.0f;
  return m + q3n_log1p01(q3n_exp(x > 0.0f ? -x : x));
}

// A stored weight element as f32: dtype 1 f32, 2 f16, 3 bf16 (memra_dtype's codes).
Q3N_HD float q3n_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return q3n_bits_float(sign);
    const float v = (float)man * 5.9604644775390625e-08f;  // man * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) return q3n_bits_float(sign | 0x7f800000u | man << 13);
  return q3n_bits_float(sign | (exp + 112u) << 23 | man << 13);
}
Q3N_HD float q3n_weight(const void* w, int32_t dtype, int64_t i) {
  if (dtype == 3) return q3n_bits_float((uint32_t)((const uint16_t*)w)[i] << 16);
  if (dtype == 2) return q3n_f16_to_f32(((const uint16_t*)w)[i]);
  return ((const float*)w)[i];
}

// Where channel c of the conv's input [q | k | v] (C = 2 Hk dk + Hv dv) sits in a qkvz row
// of Hk groups [q dk | k dk | v r dv | z r dv]; and value element c' (h dv + j) of z.
Q3N_HD int64_t q3n_qkv_source(int64_t c, int64_t hk, int64_t r, int64_t dk, int64_t dv) {
  const int64_t kd = hk * dk, group = 2 * dk + 2 * r * dv;
  if (c < kd) return (c / dk) * group + c % dk;
  if (c < 2 * kd) return ((c - kd) / dk) * group + dk + (c - kd) % dk;
  const int64_t v = c - 2 * kd;
  return (v / (r * dv)) * group + 2 * dk + v % (r * dv);
}
Q3N_HD int64_t q3n_z_source(int64_t v, int64_t r, int64_t dk, int64_t dv) {
  const int64_t group = 2 * dk + 2 * r * dv;
  return (v / (r * dv)) * group + 2 * dk + r * dv + v % (r * dv);
}

// How a step's DeltaNet inputs and weights are laid out (GdnAttrsV1.layout, bit flags):
//   QWEN3NEXT_GDN_SPLIT_QKVZ: separate qkv [T][C] rows in channel order and z [T][Hv dv]
//     (Qwen3.5; llama.cpp's attn_qkv / attn_gate), else Hugging Face Qwen3-Next's grouped
//     qkvz rows of Hk groups [q dk | k dk | v r dv | z r dv] (qkv = z);
//   QWEN3NEXT_GDN_SPLIT_BA: separate b [T][Hv] and a [T][Hv] (Qwen3.5), else grouped ba rows
//     of Hk groups [b r | a r] (b = a);
//   QWEN3NEXT_GDN_V_TILED: value head h belongs to key head h % Hk (llama.cpp's Qwen3.5
//     files reorder the value heads so), else h / r, r = Hv / Hk (Hugging Face's order);
//   QWEN3NEXT_GDN_A_DIRECT: the decay weight is A = -exp(A_log) as llama.cpp stores it
//     (ssm_a), else A_log (Hugging Face).
#define QWEN3NEXT_GDN_SPLIT_QKVZ 1
#define QWEN3NEXT_GDN_SPLIT_BA 2
#define QWEN3NEXT_GDN_V_TILED 4
#define QWEN3NEXT_GDN_A_DIRECT 8
#define QWEN3NEXT_GDN_FLAGS 15
// The longest causal conv the op takes (its kept inputs live in a kernel's registers).
#define QWEN3NEXT_GDN_MAX_CONV 8
// The recurrence kernel's block (qwen3next_kernels.cu): value columns (one warp each) per
// block, rows staged in shared memory at a time, and the shared bytes that takes for dk.
#define Q3N_RECUR_WARPS 8
#define Q3N_RECUR_CHUNK 16
// Steps of at most this many rows take the fused two-launch form (q3n_gdn_fused).
#define Q3N_FUSED_ROWS 8
Q3N_HD unsigned q3n_recur_smem(int32_t dk) {
  return (unsigned)(Q3N_RECUR_CHUNK * (2 * dk + Q3N_RECUR_WARPS + 4) * 4);
}
typedef struct q3n_sources {
  const float *qkv, *z, *b, *a;
  int32_t flags, hk, hv, dk, dv;
} q3n_sources;
Q3N_HD int64_t q3n_qkv_row(const q3n_sources* s) {
  const int64_t c = 2 * (int64_t)s->hk * s->dk + (int64_t)s->hv * s->dv;
  return (s->flags & QWEN3NEXT_GDN_SPLIT_QKVZ) ? c : c + (int64_t)s->hv * s->dv;
}
Q3N_HD float q3n_conv_in(const q3n_sources* s, int64_t t, int64_t c) {
  const int64_t r = s->hv / s->hk;
  return s->qkv[t * q3n_qkv_row(s) + ((s->flags & QWEN3NEXT_GDN_SPLIT_QKVZ) ? c : q3n_qkv_source(c, s->hk, r, s->dk, s->dv))];
}
Q3N_HD float q3n_z_in(const q3n_sources* s, int64_t t, int64_t v) {
  const int64_t r = s->hv / s->hk;
  return (s->flags & QWEN3NEXT_GDN_SPLIT_QKVZ) ? s->z[t * (int64_t)s->hv * s->dv + v]
                                               : s->z[t * q3n_qkv_row(s) + q3n_z_source(v, r, s->dk, s->dv)];
}
Q3N_HD float q3n_b_in(const q3n_sources* s, int64_t t, int64_t h) {
  const int64_t r = s->hv / s->hk;
  return (s->flags & QWEN3NEXT_GDN_SPLIT_BA) ? s->b[t * s->hv + h] : s->b[t * 2 * s->hv + (h / r) * 2 * r + h % r];
}
Q3N_HD float q3n_a_in(const q3n_sources* s, int64_t t, int64_t h) {
  const int64_t r = s->hv / s->hk;
  return (s->flags & QWEN3NEXT_GDN_SPLIT_BA) ? s->a[t * s->hv + h] : s->a[t * 2 * s->hv + (h / r) * 2 * r + r + h % r];
}
// The key head whose q and k value head h reads.
Q3N_HD int32_t q3n_key_head(const q3n_sources* s, int32_t h) {
  return (s->flags & QWEN3NEXT_GDN_V_TILED) ? h % s->hk : h / (s->hv / s->hk);
}
// Value head h's decay for this row: exp(A * softplus(a + dt_bias)), A = -exp(A_log) or the
// stored A.
Q3N_HD float q3n_decay(const q3n_sources* s, const float* a_weight, int32_t h, float a, float dt_bias) {
  const float big_a = (s->flags & QWEN3NEXT_GDN_A_DIRECT) ? a_weight[h] : -q3n_exp(a_weight[h]);
  return q3n_exp(big_a * q3n_softplus(a + dt_bias));
}

#endif
