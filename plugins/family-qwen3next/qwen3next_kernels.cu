// The CUDA forms of the family's ops (qwen3next_ops.hpp states each contract), bitwise
// their CPU references in qwen3next_ops.cpp: the same f32 operations in the same order
// (qwen3next_math.h for exp, log1p and the activations; built with --fmad=false). Loaded
// from qwen3next_kernels.fatbin beside the plugin by prepare_cuda and launched with
// argument sizes, so a decode step that runs them is still one CUDA graph.
#include "qwen3next_math.h"

// The conv of qwen3next.gated_delta_net: one thread per channel c of [q | k | v] walks the
// step's rows in batch order (a sequence's rows in position order), each on its sequence's
// kept inputs: conv_out[t][c] = silu(sum_k w[c][k] x_{t-K+1+k}[c]), the K-1 inputs before
// it then shifted in the state (and copied to the row's snapshot slot, if it has one).
extern "C" __global__ void q3n_gdn_conv(q3n_sources src, int32_t tokens, int32_t kc, const void* conv_w, int32_t w_dtype,
                                        const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                                        unsigned long long stride, float* conv_out) {
  const int64_t c_dim = 2 * (int64_t)src.hk * src.dk + (int64_t)src.hv * src.dv;
  const int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c_dim) return;
  for (int32_t t = 0; t < tokens; ++t) {
    float* cstate = (float*)(state + (unsigned long long)slots[seq_index[t]] * stride);
    const float x = q3n_conv_in(&src, t, ch);
    float acc = 0.0f;
    for (int32_t k = 0; k < kc - 1; ++k) acc = acc + q3n_weight(conv_w, w_dtype, ch * kc + k) * cstate[k * c_dim + ch];
    acc = acc + q3n_weight(conv_w, w_dtype, ch * kc + kc - 1) * x;
    for (int32_t k = 0; k + 1 < kc - 1; ++k) cstate[k * c_dim + ch] = cstate[(k + 1) * c_dim + ch];
    if (kc > 1) cstate[(kc - 2) * c_dim + ch] = x;
    conv_out[(int64_t)t * c_dim + ch] = q3n_silu(acc);
    if (snaps && snaps[t] >= 0) {  // this channel's kept inputs as they stand after row t
      float* snap = (float*)(state + (unsigned long long)snaps[t] * stride);
      for (int32_t k = 0; k < kc - 1; ++k) snap[k * c_dim + ch] = cstate[k * c_dim + ch];
    }
  }
}

// The sum of a lane's terms over the warp (qwen3next_math.h's order): xor butterfly.
__device__ inline float q3n_warp_sum(float v) {
  for (int off = 16; off >= 1; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The per-row scalars of qwen3next.gated_delta_net, parallel over rows: one warp per (row t,
// key head g) l2-normalises q (then scales it by 1/sqrt(dk)) and k of the conv output into
// qn, kn [T][Hk][dk], and gives each value head h of key head g its beta = sigmoid(b) and
// decay = exp(A softplus(a + dt_bias)) ([T][Hv]).
extern "C" __global__ void q3n_gdn_prep(q3n_sources src, const float* conv_out, int32_t tokens, const float* a_weight,
                                        const float* dt_bias, float* qn, float* kn, float* beta, float* decay) {
  const int32_t hk = src.hk, hv = src.hv, dk = src.dk, r = hv / hk;
  const int64_t kd = (int64_t)hk * dk, c_dim = 2 * kd + (int64_t)hv * src.dv;
  const int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int32_t lane = threadIdx.x % 32;
  if (w >= (int64_t)tokens * hk) return;
  const int64_t t = w / hk;
  const int32_t g = (int32_t)(w % hk);
  const float* crow = conv_out + t * c_dim;
  float sq = 0.0f, sk = 0.0f;
  for (int32_t i = lane; i < dk; i += 32) {
    const float qv = crow[(int64_t)g * dk + i], kv = crow[kd + (int64_t)g * dk + i];
    sq = sq + qv * qv;
    sk = sk + kv * kv;
  }
  sq = q3n_warp_sum(sq);
  sk = q3n_warp_sum(sk);
  const float iq = 1.0f / sqrtf(sq + 1e-6f), ik = 1.0f / sqrtf(sk + 1e-6f), q_scale = 1.0f / sqrtf((float)dk);
  float* qo = qn + w * dk;
  float* ko = kn + w * dk;
  for (int32_t i = lane; i < dk; i += 32) {
    qo[i] = crow[(int64_t)g * dk + i] * iq * q_scale;
    ko[i] = crow[kd + (int64_t)g * dk + i] * ik;
  }
  for (int32_t m = lane; m < r; m += 32) {
    const int32_t h = (src.flags & QWEN3NEXT_GDN_V_TILED) ? g + m * hk : g * r + m;
    beta[t * hv + h] = q3n_sigmoid(q3n_b_in(&src, t, h));
    decay[t * hv + h] = q3n_decay(&src, a_weight, h, q3n_a_in(&src, t, h), dt_bias[h]);
  }
}

// The recurrence of qwen3next.gated_delta_net: one warp per column j of value head h's state
// (S kept by column, [Hv][dv][dk]; lane l holds rows l, l + 32, ... in registers while
// consecutive rows are one sequence's), over the step's rows in batch order:
// S = S * decay; m = Sᵀk; S += k (beta (v - m)); o = Sᵀq into o [T][Hv*dv].
#define Q3N_MAX_LANE_ROWS 8  // dk <= 256
extern "C" __global__ void q3n_gdn_recur(q3n_sources src, const float* conv_out, const float* qn, const float* kn,
                                         const float* beta, const float* decay, int32_t tokens, int32_t kc,
                                         const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                                         unsigned long long stride, float* o) {
  const int32_t hk = src.hk, hv = src.hv, dk = src.dk, dv = src.dv;
  const int64_t kd = (int64_t)hk * dk, vd = (int64_t)hv * dv, c_dim = 2 * kd + vd;
  const int32_t h = blockIdx.x, j = blockIdx.y * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (j >= dv) return;
  const int32_t g = q3n_key_head(&src, h), rows = (dk + 31) / 32;
  const int64_t col = (kc - 1) * c_dim + ((int64_t)h * dv + j) * dk;  // this column in a slot's state (floats)
  float s[Q3N_MAX_LANE_ROWS];
  int32_t cur = -1;
  for (int32_t t = 0; t < tokens; ++t) {
    const int32_t slot = slots[seq_index[t]];
    if (slot != cur) {
      if (cur >= 0) {
        float* old = (float*)(state + (unsigned long long)cur * stride) + col;
#pragma unroll
        for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
          if (r < rows && r * 32 + lane < dk) old[r * 32 + lane] = s[r];
      }
      const float* next = (const float*)(state + (unsigned long long)slot * stride) + col;
#pragma unroll
      for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r) s[r] = r < rows && r * 32 + lane < dk ? next[r * 32 + lane] : 0.0f;
      cur = slot;
    }
    const float dec = decay[(int64_t)t * hv + h], bt = beta[(int64_t)t * hv + h];
    const float* kr = kn + ((int64_t)t * hk + g) * dk;
    const float* qr = qn + ((int64_t)t * hk + g) * dk;
    float m = 0.0f;
#pragma unroll
    for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
      if (r < rows && r * 32 + lane < dk) {
        s[r] = s[r] * dec;
        m = m + s[r] * kr[r * 32 + lane];
      }
    m = q3n_warp_sum(m);
    const float d = (conv_out[(int64_t)t * c_dim + 2 * kd + (int64_t)h * dv + j] - m) * bt;
    float out = 0.0f;
#pragma unroll
    for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
      if (r < rows && r * 32 + lane < dk) {
        s[r] = s[r] + kr[r * 32 + lane] * d;
        out = out + s[r] * qr[r * 32 + lane];
      }
    out = q3n_warp_sum(out);
    if (lane == 0) o[(int64_t)t * vd + (int64_t)h * dv + j] = out;
    if (snaps && snaps[t] >= 0) {  // this column as it stands after row t
      float* snap = (float*)(state + (unsigned long long)snaps[t] * stride) + col;
#pragma unroll
      for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
        if (r < rows && r * 32 + lane < dk) snap[r * 32 + lane] = s[r];
    }
  }
  if (cur >= 0) {
    float* old = (float*)(state + (unsigned long long)cur * stride) + col;
#pragma unroll
    for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
      if (r < rows && r * 32 + lane < dk) old[r * 32 + lane] = s[r];
  }
}

// The gated RMSNorm of qwen3next.gated_delta_net, in place: one warp per (row t, value head h):
// y = w * (o / sqrt(mean(o^2) + eps)) * silu(z) over the head's dv outputs.
extern "C" __global__ void q3n_gdn_out(q3n_sources src, int32_t tokens, const float* norm_w, float eps, float* y) {
  const int32_t hv = src.hv, dv = src.dv;
  const int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int32_t lane = threadIdx.x % 32;
  if (w >= (int64_t)tokens * hv) return;
  const int64_t t = w / hv;
  const int32_t h = (int32_t)(w % hv);
  float* yr = y + w * dv;
  float ss = 0.0f;
  for (int32_t j = lane; j < dv; j += 32) ss = ss + yr[j] * yr[j];
  ss = q3n_warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / (float)dv + eps);
  for (int32_t j = lane; j < dv; j += 32) yr[j] = norm_w[j] * (yr[j] * inv) * q3n_silu(q3n_z_in(&src, t, (int64_t)h * dv + j));
}

// qwen3next.split_gate: rows [T*H] of [q D | gate D] into q and gate.
extern "C" __global__ void q3n_split_gate(const float* in, long long rows, int32_t d, float* q, float* gate) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * d) return;
  const long long row = i / d, e = i % d;
  q[i] = in[row * 2 * d + e];
  gate[i] = in[row * 2 * d + d + e];
}

// qwen3next.sigmoid_mul: y = x * sigmoid(g), g per element (gw == n) or per row (gw == 1).
extern "C" __global__ void q3n_sigmoid_mul(const float* x, const float* g, long long rows, int32_t n, int32_t gw, float* y) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const long long row = i / n, e = i % n;
  y[i] = x[i] * q3n_sigmoid(g[row * gw + (gw == 1 ? 0 : e)]);
}

// qwen3next.concat: out [rows][a+b] = x [rows][a] beside y [rows][b].
extern "C" __global__ void q3n_concat(const float* x, const float* y, long long rows, int32_t a, int32_t b, float* out) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long w = (long long)a + b;
  if (i >= rows * w) return;
  const long long row = i / w, e = i % w;
  out[i] = e < a ? x[row * a + e] : y[row * b + (e - a)];
}
