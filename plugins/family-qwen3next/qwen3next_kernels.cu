// The CUDA forms of the family's ops (qwen3next_ops.hpp states each contract), bitwise
// their CPU references in qwen3next_ops.cpp: the same f32 operations in the same order
// (qwen3next_math.h for exp, log1p and the activations; built with --fmad=false). Loaded
// from qwen3next_kernels.fatbin beside the plugin by prepare_cuda and launched with
// argument sizes, so a decode step that runs them is still one CUDA graph.
#include "qwen3next_math.h"

// The conv of qwen3next.gated_delta_net: one thread per channel c of [q | k | v] walks the
// step's rows in batch order (a sequence's rows in position order), each on its sequence's
// kept inputs: conv_out[t][c] = silu(sum_k w[c][k] x_{t-K+1+k}[c]), the K-1 inputs before
// it then shifted in the state.
extern "C" __global__ void q3n_gdn_conv(q3n_sources src, int32_t tokens, int32_t kc, const void* conv_w, int32_t w_dtype,
                                        const int32_t* seq_index, const int32_t* slots, char* state, unsigned long long stride,
                                        float* conv_out) {
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
  }
}

// The recurrence of qwen3next.gated_delta_net: one CTA per value head h, thread j owning
// column j of the head's state S [dk][dv] (kept in shared memory while consecutive rows are
// its sequence's), over the step's rows in batch order. Thread 0 does the reductions that
// span a head (q/k norms, the gated RMSNorm) in index order, as the reference does.
extern "C" __global__ void q3n_gdn_recur(q3n_sources src, const float* conv_out, int32_t tokens, int32_t kc, const float* a_weight,
                                         const float* dt_bias, const float* norm_w, float eps, const int32_t* seq_index,
                                         const int32_t* slots, char* state, unsigned long long stride, float* y) {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  const int32_t hk = src.hk, hv = src.hv, dk = src.dk, dv = src.dv;
  const int64_t kd = (int64_t)hk * dk, vd = (int64_t)hv * dv, c_dim = 2 * kd + vd;
  const int32_t h = blockIdx.x, gi = q3n_key_head(&src, h), tid = threadIdx.x, nthreads = blockDim.x;
  float* S = (float*)smem_raw;  // [dk][dv]
  float* qs = S + (int64_t)dk * dv;
  float* ks = qs + dk;
  float* os = ks + dk;
  float* scal = os + dv;  // iq, ik, beta, decay, inv
  const float q_scale = 1.0f / sqrtf((float)dk);
  int32_t cur = -1;
  for (int32_t t = 0; t < tokens; ++t) {
    const int32_t slot = slots[seq_index[t]];
    if (slot != cur) {  // this head's S of the row's sequence (every thread decides alike)
      if (cur >= 0) {
        float* old = (float*)(state + (unsigned long long)cur * stride) + (kc - 1) * c_dim + (int64_t)h * dk * dv;
        for (int64_t e = tid; e < (int64_t)dk * dv; e += nthreads) old[e] = S[e];
      }
      const float* next = (const float*)(state + (unsigned long long)slot * stride) + (kc - 1) * c_dim + (int64_t)h * dk * dv;
      for (int64_t e = tid; e < (int64_t)dk * dv; e += nthreads) S[e] = next[e];
      cur = slot;
    }
    const float* crow = conv_out + (int64_t)t * c_dim;
    for (int32_t i = tid; i < dk; i += nthreads) {
      qs[i] = crow[(int64_t)gi * dk + i];
      ks[i] = crow[kd + (int64_t)gi * dk + i];
    }
    __syncthreads();
    if (tid == 0) {
      float sq = 0.0f, sk = 0.0f;
      for (int32_t i = 0; i < dk; ++i) {
        sq = sq + qs[i] * qs[i];
        sk = sk + ks[i] * ks[i];
      }
      scal[0] = 1.0f / sqrtf(sq + 1e-6f);
      scal[1] = 1.0f / sqrtf(sk + 1e-6f);
      const float b = q3n_b_in(&src, t, h), a = q3n_a_in(&src, t, h);
      scal[2] = q3n_sigmoid(b);
      scal[3] = q3n_decay(&src, a_weight, h, a, dt_bias[h]);
    }
    __syncthreads();
    for (int32_t i = tid; i < dk; i += nthreads) {
      qs[i] = qs[i] * scal[0] * q_scale;
      ks[i] = ks[i] * scal[1];
    }
    __syncthreads();
    const float beta = scal[2], decay = scal[3];
    for (int32_t j = tid; j < dv; j += nthreads) {
      float acc = 0.0f;
      for (int32_t i = 0; i < dk; ++i) {
        S[(int64_t)i * dv + j] = S[(int64_t)i * dv + j] * decay;
        acc = acc + S[(int64_t)i * dv + j] * ks[i];
      }
      const float d = (crow[2 * kd + (int64_t)h * dv + j] - acc) * beta;
      float out = 0.0f;
      for (int32_t i = 0; i < dk; ++i) {
        S[(int64_t)i * dv + j] = S[(int64_t)i * dv + j] + ks[i] * d;
        out = out + S[(int64_t)i * dv + j] * qs[i];
      }
      os[j] = out;
    }
    __syncthreads();
    if (tid == 0) {
      float ss = 0.0f;
      for (int32_t j = 0; j < dv; ++j) ss = ss + os[j] * os[j];
      scal[4] = 1.0f / sqrtf(ss / (float)dv + eps);
    }
    __syncthreads();
    for (int32_t j = tid; j < dv; j += nthreads)
      y[(int64_t)t * vd + (int64_t)h * dv + j] = norm_w[j] * (os[j] * scal[4]) * q3n_silu(q3n_z_in(&src, t, (int64_t)h * dv + j));
    __syncthreads();  // qs, ks, os and scal are the next row's
  }
  if (cur >= 0) {
    float* old = (float*)(state + (unsigned long long)cur * stride) + (kc - 1) * c_dim + (int64_t)h * dk * dv;
    for (int64_t e = tid; e < (int64_t)dk * dv; e += nthreads) old[e] = S[e];
  }
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
