// The CUDA forms of the family's ops (qwen3next_ops.hpp states each contract), bitwise
// their CPU references in qwen3next_ops.cpp: the same f32 operations in the same order
// (qwen3next_math.h for exp, log1p and the activations; built with --fmad=false). Loaded
// from qwen3next_kernels.fatbin beside the plugin by prepare_cuda and launched with
// argument sizes, so a decode step that runs them is still one CUDA graph.
#include "qwen3next_math.h"

// The conv of qwen3next.gated_delta_net: one thread per channel c of [q | k | v] walks the
// step's rows in batch order (a sequence's rows in position order), each on its sequence's
// kept inputs: conv_out[t][c] = silu(sum_k w[c][k] x_{t-K+1+k}[c]), the K-1 inputs before
// it then shifted in the state (and copied to the row's snapshot slot, if it has one). The
// weights and the kept inputs stay in registers while consecutive rows are one sequence's
// (written back when the sequence changes and at the end), and each group of
// Q3N_CONV_GROUP rows' inputs is loaded before any of them is used, so the walk waits on
// memory once a group, not once a row.
#define Q3N_CONV_GROUP 16
// Channel ch's walk (conv_out NULL: the kept inputs and snapshots only, q3n_gdn_out_conv's part).
__device__ inline void q3n_conv_walk(const q3n_sources& src, int32_t tokens, int32_t kc, const void* conv_w, int32_t w_dtype,
                                     const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                                     unsigned long long stride, float* conv_out, int64_t ch, int64_t c_dim) {
  float w[QWEN3NEXT_GDN_MAX_CONV], win[QWEN3NEXT_GDN_MAX_CONV];  // win[k]: x_{t-K+1+k}, oldest first (k < K-1)
#pragma unroll
  for (int32_t k = 0; k < QWEN3NEXT_GDN_MAX_CONV; ++k) {
    w[k] = conv_out && k < kc ? q3n_weight(conv_w, w_dtype, ch * kc + k) : 0.0f;
    win[k] = 0.0f;
  }
  int32_t cur = -1;
  for (int32_t t0 = 0; t0 < tokens; t0 += Q3N_CONV_GROUP) {
    float xs[Q3N_CONV_GROUP];
#pragma unroll
    for (int32_t u = 0; u < Q3N_CONV_GROUP; ++u) xs[u] = t0 + u < tokens ? q3n_conv_in(&src, t0 + u, ch) : 0.0f;
#pragma unroll
    for (int32_t u = 0; u < Q3N_CONV_GROUP; ++u) {
      const int32_t t = t0 + u;
      if (t >= tokens) break;
      const int32_t slot = slots[seq_index[t]];
      if (slot != cur) {
        if (cur >= 0) {
          float* old = (float*)(state + (unsigned long long)cur * stride);
#pragma unroll
          for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k)
            if (k < kc - 1) old[k * c_dim + ch] = win[k];
        }
        const float* next = (const float*)(state + (unsigned long long)slot * stride);
#pragma unroll
        for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k)
          if (k < kc - 1) win[k] = next[k * c_dim + ch];
        cur = slot;
      }
      const float x = xs[u];
      if (conv_out) {
        float acc = 0.0f;
#pragma unroll
        for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k)
          if (k < kc - 1) acc = acc + w[k] * win[k];
#pragma unroll
        for (int32_t k = 0; k < QWEN3NEXT_GDN_MAX_CONV; ++k)
          if (k == kc - 1) acc = acc + w[k] * x;
        conv_out[(int64_t)t * c_dim + ch] = q3n_silu(acc);
      }
#pragma unroll
      for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k) {
        if (k + 1 < kc - 1) win[k] = win[k + 1];
        else if (k + 1 == kc - 1) win[k] = x;
      }
      if (snaps && snaps[t] >= 0) {  // this channel's kept inputs as they stand after row t
        float* snap = (float*)(state + (unsigned long long)snaps[t] * stride);
#pragma unroll
        for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k)
          if (k < kc - 1) snap[k * c_dim + ch] = win[k];
      }
    }
  }
  if (cur >= 0) {
    float* old = (float*)(state + (unsigned long long)cur * stride);
#pragma unroll
    for (int32_t k = 0; k + 1 < QWEN3NEXT_GDN_MAX_CONV; ++k)
      if (k < kc - 1) old[k * c_dim + ch] = win[k];
  }
}

extern "C" __global__ void q3n_gdn_conv(q3n_sources src, int32_t tokens, int32_t kc, const void* conv_w, int32_t w_dtype,
                                        const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                                        unsigned long long stride, float* conv_out) {
  const int64_t c_dim = 2 * (int64_t)src.hk * src.dk + (int64_t)src.hv * src.dv;
  const int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c_dim) return;
  q3n_conv_walk(src, tokens, kc, conv_w, w_dtype, seq_index, slots, snaps, state, stride, conv_out, ch, c_dim);
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
// S = S * decay; m = Sᵀk; S += k (beta (v - m)); o = Sᵀq into o [T][Hv*dv]. A block is
// Q3N_RECUR_WARPS columns of one head (grid: Hv x ceil(dv / Q3N_RECUR_WARPS)); its threads
// stage Q3N_RECUR_CHUNK rows' k, q, v, beta, decay and slots in shared memory
// (q3n_recur_smem bytes) before its warps walk them, so a row costs the warp its
// arithmetic and shuffles, not a global load.
#define Q3N_MAX_LANE_ROWS 8  // dk <= 256

// A column's state (s, its slot cur) written back to its slot.
__device__ inline void q3n_column_store(char* state, unsigned long long stride, int64_t col, int32_t cur, const float* s, int32_t rows,
                                        int32_t dk, int32_t lane) {
  if (cur < 0) return;
  float* old = (float*)(state + (unsigned long long)cur * stride) + col;
#pragma unroll
  for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
    if (r < rows && r * 32 + lane < dk) old[r * 32 + lane] = s[r];
}

// The recurrence of one state column (lane l holding rows l, l + 32, ...: s, of slot cur)
// over n staged rows: row u's q at q + u * q_stride, k at k + u * k_stride, v at
// v[u * v_stride], decay, beta, slot and snapshot slot at dec[u], ...; its output to
// o[u * o_stride]. S = S * decay; m = Sᵀk; S += k (beta (v - m)); o = Sᵀq.
__device__ inline void q3n_column_rows(int32_t n, const float* q, const float* k, int32_t qk_stride, const float* v, int32_t v_stride,
                                       const float* dec, const float* beta, const int32_t* slot, const int32_t* snap, char* state,
                                       unsigned long long stride, int64_t col, int32_t rows, int32_t dk, int32_t lane, float* s,
                                       int32_t& cur, float* o, int64_t o_stride) {
  for (int32_t u = 0; u < n; ++u) {
    if (slot[u] != cur) {
      q3n_column_store(state, stride, col, cur, s, rows, dk, lane);
      const float* next = (const float*)(state + (unsigned long long)slot[u] * stride) + col;
#pragma unroll
      for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r) s[r] = r < rows && r * 32 + lane < dk ? next[r * 32 + lane] : 0.0f;
      cur = slot[u];
    }
    const float* kr = k + u * qk_stride;
    const float* qr = q + u * qk_stride;
    float m = 0.0f;
#pragma unroll
    for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
      if (r < rows && r * 32 + lane < dk) {
        s[r] = s[r] * dec[u];
        m = m + s[r] * kr[r * 32 + lane];
      }
    m = q3n_warp_sum(m);
    const float d = (v[u * v_stride] - m) * beta[u];
    float out = 0.0f;
#pragma unroll
    for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r)
      if (r < rows && r * 32 + lane < dk) {
        s[r] = s[r] + kr[r * 32 + lane] * d;
        out = out + s[r] * qr[r * 32 + lane];
      }
    out = q3n_warp_sum(out);
    if (lane == 0) o[u * o_stride] = out;
    if (snap[u] >= 0) q3n_column_store(state, stride, col, snap[u], s, rows, dk, lane);  // the column as it stands after row u
  }
}
extern "C" __global__ void __launch_bounds__(Q3N_RECUR_WARPS * 32)
    q3n_gdn_recur(q3n_sources src, const float* conv_out, const float* qn, const float* kn, const float* beta, const float* decay,
                  int32_t tokens, int32_t kc, const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                  unsigned long long stride, float* o) {
#if defined(__CUDACC__)
  extern __shared__ __align__(16) unsigned char smem_raw[];
#endif
  const int32_t hk = src.hk, hv = src.hv, dk = src.dk, dv = src.dv;
  const int64_t kd = (int64_t)hk * dk, vd = (int64_t)hv * dv, c_dim = 2 * kd + vd;
  const int32_t h = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, j0 = blockIdx.y * Q3N_RECUR_WARPS;
  const int32_t j = j0 + warp, nthreads = blockDim.x;
  const bool live = j < dv;  // (a warp past dv still takes the block's barriers)
  const int32_t g = q3n_key_head(&src, h), rows = (dk + 31) / 32;
  float* sk = (float*)smem_raw;                    // [chunk][dk]
  float* sq = sk + Q3N_RECUR_CHUNK * dk;           // [chunk][dk]
  float* sv = sq + Q3N_RECUR_CHUNK * dk;           // [chunk][warps]
  float* sdec = sv + Q3N_RECUR_CHUNK * Q3N_RECUR_WARPS;
  float* sbeta = sdec + Q3N_RECUR_CHUNK;
  int32_t* sslot = (int32_t*)(sbeta + Q3N_RECUR_CHUNK);
  int32_t* ssnap = sslot + Q3N_RECUR_CHUNK;
  const int64_t col = (kc - 1) * c_dim + ((int64_t)h * dv + j) * dk;  // this column in a slot's state (floats)
  float s[Q3N_MAX_LANE_ROWS];
#pragma unroll
  for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r) s[r] = 0.0f;
  int32_t cur = -1;
  for (int32_t t0 = 0; t0 < tokens; t0 += Q3N_RECUR_CHUNK) {
    const int32_t n = tokens - t0 < Q3N_RECUR_CHUNK ? tokens - t0 : Q3N_RECUR_CHUNK;
    __syncthreads();  // the last chunk's rows are walked
    for (int32_t i = threadIdx.x; i < n * dk; i += nthreads) {
      const int64_t at = ((int64_t)(t0 + i / dk) * hk + g) * dk + i % dk;
      sk[i] = kn[at];
      sq[i] = qn[at];
    }
    for (int32_t i = threadIdx.x; i < n * Q3N_RECUR_WARPS; i += nthreads) {
      const int32_t jj = j0 + i % Q3N_RECUR_WARPS;
      sv[i] = jj < dv ? conv_out[(int64_t)(t0 + i / Q3N_RECUR_WARPS) * c_dim + 2 * kd + (int64_t)h * dv + jj] : 0.0f;
    }
    for (int32_t i = threadIdx.x; i < n; i += nthreads) {
      sdec[i] = decay[(int64_t)(t0 + i) * hv + h];
      sbeta[i] = beta[(int64_t)(t0 + i) * hv + h];
      sslot[i] = slots[seq_index[t0 + i]];
      ssnap[i] = snaps ? snaps[t0 + i] : -1;
    }
    __syncthreads();
    if (live)
      q3n_column_rows(n, sq, sk, dk, sv + warp, Q3N_RECUR_WARPS, sdec, sbeta, sslot, ssnap, state, stride, col, rows, dk, lane, s, cur,
                      o + (int64_t)t0 * vd + (int64_t)h * dv + j, vd);
  }
  if (live) q3n_column_store(state, stride, col, cur, s, rows, dk, lane);
}

// The gated RMSNorm of qwen3next.gated_delta_net, in place: one warp per (row t, value head h):
// y = w * (o / sqrt(mean(o^2) + eps)) * silu(z) over the head's dv outputs.
__device__ inline void q3n_out_pair(const q3n_sources& src, int32_t tokens, const float* norm_w, float eps, float* y, int64_t w,
                                    int32_t lane) {
  const int32_t hv = src.hv, dv = src.dv;
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
extern "C" __global__ void q3n_gdn_out(q3n_sources src, int32_t tokens, const float* norm_w, float eps, float* y) {
  q3n_out_pair(src, tokens, norm_w, eps, y, (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, threadIdx.x % 32);
}

// The small steps' form (decode and verify steps, at most Q3N_FUSED_ROWS rows): two launches
// instead of four. q3n_gdn_fused: a block of Q3N_RECUR_WARPS state columns of value head h
// (grid Hv x ceil(dv / Q3N_RECUR_WARPS)) takes the conv of the channels it reads — its key
// head's q and k, its columns' v — with every row's kept inputs read, not shifted (a row's
// earlier inputs are its sequence's earlier rows in the step, then the state's last ones),
// then the q/k norms, beta and decay, then the recurrence of q3n_gdn_recur; the same
// operations in the same order, so bitwise the four kernels. q3n_gdn_out_conv: the gated
// RMSNorm (blocks below out_blocks, four warps each) and the conv's kept inputs shifted in
// the state and its snapshots (the other blocks, a thread per channel).
extern "C" __global__ void __launch_bounds__(Q3N_RECUR_WARPS * 32)
    q3n_gdn_fused(q3n_sources src, int32_t tokens, int32_t kc, const void* conv_w, int32_t w_dtype, const float* a_weight,
                  const float* dt_bias, const int32_t* seq_index, const int32_t* slots, const int32_t* snaps, char* state,
                  unsigned long long stride, float* o) {
  __shared__ float sc[Q3N_FUSED_ROWS * (2 * 256 + Q3N_RECUR_WARPS)];  // [row][q dk | k dk | v warps]: conv outputs, q/k normed
  __shared__ float sdec[Q3N_FUSED_ROWS], sbeta[Q3N_FUSED_ROWS];
  __shared__ int32_t sslot[Q3N_FUSED_ROWS], ssnap[Q3N_FUSED_ROWS];
  const int32_t hk = src.hk, hv = src.hv, dk = src.dk, dv = src.dv;
  const int64_t kd = (int64_t)hk * dk, vd = (int64_t)hv * dv, c_dim = 2 * kd + vd;
  const int32_t h = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32, j0 = blockIdx.y * Q3N_RECUR_WARPS;
  const int32_t j = j0 + warp, nthreads = blockDim.x, nch = 2 * dk + Q3N_RECUR_WARPS;
  const int32_t g = q3n_key_head(&src, h), rows = (dk + 31) / 32;
  // The conv of the block's channels, row by row.
  for (int32_t ci = threadIdx.x; ci < nch; ci += nthreads) {
    const int64_t ch = ci < dk ? (int64_t)g * dk + ci : ci < 2 * dk ? kd + (int64_t)g * dk + (ci - dk) : 2 * kd + (int64_t)h * dv + j0 + (ci - 2 * dk);
    if (ci >= 2 * dk && j0 + (ci - 2 * dk) >= dv) continue;
    float w[QWEN3NEXT_GDN_MAX_CONV];
#pragma unroll
    for (int32_t k = 0; k < QWEN3NEXT_GDN_MAX_CONV; ++k) w[k] = k < kc ? q3n_weight(conv_w, w_dtype, ch * kc + k) : 0.0f;
    for (int32_t t = 0; t < tokens; ++t) {
      // win[k] = x_{t-K+1+k}: walking back, the sequence's earlier rows here, then its state.
      float win[QWEN3NEXT_GDN_MAX_CONV];
      const int32_t seq = seq_index[t];
      int32_t k = kc - 2, u = t - 1;
      for (; k >= 0 && u >= 0; --u)
        if (seq_index[u] == seq) win[k--] = q3n_conv_in(&src, u, ch);
      const float* kept = (const float*)(state + (unsigned long long)slots[seq] * stride);
      for (int32_t m = kc - 2; k >= 0; --k, --m) win[k] = kept[(int64_t)m * c_dim + ch];
      float acc = 0.0f;
      for (int32_t q = 0; q + 1 < kc; ++q) acc = acc + w[q] * win[q];
      acc = acc + w[kc - 1] * q3n_conv_in(&src, t, ch);
      sc[t * nch + ci] = q3n_silu(acc);
    }
  }
  __syncthreads();
  // The q and k norms of each row (a warp each, q3n_gdn_prep's order), beta, decay, the slots.
  for (int32_t task = warp; task < 2 * tokens; task += nthreads / 32) {
    float* x = sc + (task / 2) * nch + (task % 2) * dk;
    float ss = 0.0f;
    for (int32_t i = lane; i < dk; i += 32) ss = ss + x[i] * x[i];
    ss = q3n_warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss + 1e-6f), q_scale = 1.0f / sqrtf((float)dk);
    for (int32_t i = lane; i < dk; i += 32) x[i] = task % 2 ? x[i] * inv : x[i] * inv * q_scale;
  }
  for (int32_t t = threadIdx.x; t < tokens; t += nthreads) {
    sbeta[t] = q3n_sigmoid(q3n_b_in(&src, t, h));
    sdec[t] = q3n_decay(&src, a_weight, h, q3n_a_in(&src, t, h), dt_bias[h]);
    sslot[t] = slots[seq_index[t]];
    ssnap[t] = snaps ? snaps[t] : -1;
  }
  __syncthreads();
  if (j >= dv) return;  // (no barrier below)
  const int64_t col = (kc - 1) * c_dim + ((int64_t)h * dv + j) * dk;  // this column in a slot's state (floats)
  float s[Q3N_MAX_LANE_ROWS];
#pragma unroll
  for (int32_t r = 0; r < Q3N_MAX_LANE_ROWS; ++r) s[r] = 0.0f;
  int32_t cur = -1;
  q3n_column_rows(tokens, sc, sc + dk, nch, sc + 2 * dk + warp, nch, sdec, sbeta, sslot, ssnap, state, stride, col, rows, dk, lane, s,
                  cur, o + (int64_t)h * dv + j, vd);
  q3n_column_store(state, stride, col, cur, s, rows, dk, lane);
}

extern "C" __global__ void q3n_gdn_out_conv(q3n_sources src, int32_t tokens, const float* norm_w, float eps, float* y, int32_t out_blocks,
                                            int32_t kc, const int32_t* seq_index, const int32_t* slots, const int32_t* snaps,
                                            char* state, unsigned long long stride) {
  if ((int32_t)blockIdx.x < out_blocks) {
    q3n_out_pair(src, tokens, norm_w, eps, y, (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, threadIdx.x % 32);
    return;
  }
  const int64_t c_dim = 2 * (int64_t)src.hk * src.dk + (int64_t)src.hv * src.dv;
  const int64_t ch = (int64_t)(blockIdx.x - out_blocks) * blockDim.x + threadIdx.x;
  if (ch >= c_dim) return;
  q3n_conv_walk(src, tokens, kc, nullptr, 0, seq_index, slots, snaps, state, stride, nullptr, ch, c_dim);
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
