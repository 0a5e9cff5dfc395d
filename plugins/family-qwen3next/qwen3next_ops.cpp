// CPU references of the family's ops (qwen3next_ops.hpp states each contract).
#include "qwen3next_ops.hpp"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "family_plugin_support.hpp"

namespace memra::qwen3next {
namespace {

using family::guarded;
using family::report;

int64_t numel(const memra_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
int64_t last_dim(const memra_tensor* t) { return t->ndim > 0 ? t->shape[t->ndim - 1] : 0; }

float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) u = sign;
    else {  // subnormal: renormalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3ffu) << 13;
    }
  } else if (exp == 31) u = sign | 0x7f800000u | man << 13;
  else u = sign | (exp + 127 - 15) << 23 | man << 13;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// A weight's elements as f32 (it may be stored f32, bf16 or f16).
bool weight_f32(const memra_weight* w, int64_t n, std::vector<float>& out) {
  if (!w || !w->data) return false;
  out.resize(static_cast<size_t>(n));
  if (w->dtype == MEMRA_DTYPE_F32) {
    if (w->bytes < static_cast<uint64_t>(n) * 4) return false;
    std::memcpy(out.data(), w->data, static_cast<size_t>(n) * 4);
    return true;
  }
  if (w->dtype != MEMRA_DTYPE_BF16 && w->dtype != MEMRA_DTYPE_F16) return false;
  if (w->bytes < static_cast<uint64_t>(n) * 2) return false;
  const auto* h = static_cast<const uint16_t*>(w->data);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = w->dtype == MEMRA_DTYPE_BF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
  return true;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu(float x) { return x / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// ---- qwen3next.gated_delta_net ----------------------------------------------------------

memra_status gdn_cpu(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    const auto& at = *static_cast<const GdnAttrsV1*>(args->attrs);
    const int64_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, kc = at.conv_kernel;
    if (hk <= 0 || hv <= 0 || hv % hk != 0 || dk <= 0 || dv <= 0 || kc < 1 || !(at.norm_eps > 0))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: bad attributes");
    const int64_t r = hv / hk, kd = hk * dk, vd = hv * dv, c_dim = 2 * kd + vd, T = args->batch->num_tokens;
    if (args->num_inputs != 2 || args->num_outputs != 1 || args->num_weights != 4 || last_dim(args->inputs[0]) != 2 * kd + 2 * vd ||
        numel(args->inputs[0]) != T * (2 * kd + 2 * vd) || last_dim(args->inputs[1]) != 2 * hv || numel(args->inputs[1]) != T * 2 * hv ||
        numel(args->outputs[0]) != T * vd)
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT,
                    "qwen3next.gated_delta_net: takes qkvz [T][2*Hk*dk + 2*Hv*dv], ba [T][2*Hv], 4 weights and y [T][Hv*dv]");
    if (env->state_stride < gdn_state_bytes(at))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: the layer keeps less state than these sizes need");
    std::vector<float> conv_w, a_log, dt_bias, norm_w;
    if (!weight_f32(args->weights[0], c_dim * kc, conv_w) || !weight_f32(args->weights[1], hv, a_log) ||
        !weight_f32(args->weights[2], hv, dt_bias) || !weight_f32(args->weights[3], dv, norm_w))
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: a weight is missing, too small or not a float type");
    const auto* qkvz = static_cast<const float*>(args->inputs[0]->data);
    const auto* ba = static_cast<const float*>(args->inputs[1]->data);
    auto* y = static_cast<float*>(args->outputs[0]->data);
    std::vector<float> mixed(static_cast<size_t>(c_dim)), conv(static_cast<size_t>(c_dim)), z(static_cast<size_t>(vd)),
        beta(static_cast<size_t>(hv)), g(static_cast<size_t>(hv)), m(static_cast<size_t>(dv)), o(static_cast<size_t>(dv));
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
    for (int64_t t = 0; t < T; ++t) {
      char* slot = static_cast<char*>(env->state) + static_cast<uint64_t>(env->state_slots[env->seq_index[t]]) * env->state_stride;
      float* cstate = reinterpret_cast<float*>(slot);       // [K-1][C]
      float* S = cstate + (kc - 1) * c_dim;                  // [Hv][dk][dv]
      const float* row = qkvz + t * (2 * kd + 2 * vd);
      const int64_t group = 2 * dk + 2 * r * dv;
      for (int64_t gi = 0; gi < hk; ++gi) {
        const float* in = row + gi * group;
        for (int64_t i = 0; i < dk; ++i) {
          mixed[static_cast<size_t>(gi * dk + i)] = in[i];
          mixed[static_cast<size_t>(kd + gi * dk + i)] = in[dk + i];
        }
        for (int64_t j = 0; j < r * dv; ++j) {
          mixed[static_cast<size_t>(2 * kd + gi * r * dv + j)] = in[2 * dk + j];
          z[static_cast<size_t>(gi * r * dv + j)] = in[2 * dk + r * dv + j];
        }
        for (int64_t j = 0; j < r; ++j) {
          const float bj = ba[t * 2 * hv + gi * 2 * r + j], aj = ba[t * 2 * hv + gi * 2 * r + r + j];
          const int64_t h = gi * r + j;
          beta[static_cast<size_t>(h)] = sigmoid(bj);
          g[static_cast<size_t>(h)] = -std::exp(a_log[static_cast<size_t>(h)]) * softplus(aj + dt_bias[static_cast<size_t>(h)]);
        }
      }
      // Causal depthwise conv over the K-1 kept inputs and this one, then SiLU.
      for (int64_t ch = 0; ch < c_dim; ++ch) {
        const float* w = conv_w.data() + ch * kc;
        float acc = 0.0f;
        for (int64_t k = 0; k < kc - 1; ++k) acc += w[k] * cstate[k * c_dim + ch];
        acc += w[kc - 1] * mixed[static_cast<size_t>(ch)];
        conv[static_cast<size_t>(ch)] = silu(acc);
      }
      for (int64_t k = 0; k + 1 < kc - 1; ++k) std::memcpy(cstate + k * c_dim, cstate + (k + 1) * c_dim, static_cast<size_t>(c_dim) * 4);
      if (kc > 1) std::memcpy(cstate + (kc - 2) * c_dim, mixed.data(), static_cast<size_t>(c_dim) * 4);
      // l2-normalised q (scaled) and k per key head.
      float* q = conv.data();
      float* kk = conv.data() + kd;
      const float* v = conv.data() + 2 * kd;
      for (int64_t gi = 0; gi < hk; ++gi) {
        float sq = 0.0f, sk = 0.0f;
        for (int64_t i = 0; i < dk; ++i) {
          sq += q[gi * dk + i] * q[gi * dk + i];
          sk += kk[gi * dk + i] * kk[gi * dk + i];
        }
        const float iq = 1.0f / std::sqrt(sq + 1e-6f), ik = 1.0f / std::sqrt(sk + 1e-6f);
        for (int64_t i = 0; i < dk; ++i) {
          q[gi * dk + i] = q[gi * dk + i] * iq * q_scale;
          kk[gi * dk + i] = kk[gi * dk + i] * ik;
        }
      }
      for (int64_t h = 0; h < hv; ++h) {
        const float* qh = q + (h / r) * dk;
        const float* kh = kk + (h / r) * dk;
        const float* vh = v + h * dv;
        float* Sh = S + h * dk * dv;
        const float decay = std::exp(g[static_cast<size_t>(h)]);
        for (int64_t i = 0; i < dk * dv; ++i) Sh[i] *= decay;
        for (int64_t j = 0; j < dv; ++j) {
          float acc = 0.0f;
          for (int64_t i = 0; i < dk; ++i) acc += Sh[i * dv + j] * kh[i];
          m[static_cast<size_t>(j)] = (vh[j] - acc) * beta[static_cast<size_t>(h)];
        }
        for (int64_t i = 0; i < dk; ++i)
          for (int64_t j = 0; j < dv; ++j) Sh[i * dv + j] += kh[i] * m[static_cast<size_t>(j)];
        for (int64_t j = 0; j < dv; ++j) {
          float acc = 0.0f;
          for (int64_t i = 0; i < dk; ++i) acc += Sh[i * dv + j] * qh[i];
          o[static_cast<size_t>(j)] = acc;
        }
        // Gated RMSNorm over the head.
        float ss = 0.0f;
        for (int64_t j = 0; j < dv; ++j) ss += o[static_cast<size_t>(j)] * o[static_cast<size_t>(j)];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dv) + at.norm_eps);
        float* yh = y + t * vd + h * dv;
        for (int64_t j = 0; j < dv; ++j)
          yh[j] = norm_w[static_cast<size_t>(j)] * (o[static_cast<size_t>(j)] * inv) * silu(z[static_cast<size_t>(h * dv + j)]);
      }
    }
    return MEMRA_OK;
  });
}

// ---- qwen3next.split_gate ---------------------------------------------------------------

memra_status split_gate_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    const auto& at = *static_cast<const SplitGateAttrsV1*>(args->attrs);
    const int64_t h = at.heads, d = at.head_dim;
    if (h <= 0 || d <= 0 || args->num_inputs != 1 || args->num_outputs != 2 || last_dim(args->inputs[0]) != 2 * h * d ||
        last_dim(args->outputs[0]) != h * d || last_dim(args->outputs[1]) != h * d)
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.split_gate: takes [T][H*2*D] into two [T][H*D]");
    const int64_t T = numel(args->inputs[0]) / (2 * h * d);
    if (numel(args->outputs[0]) != T * h * d || numel(args->outputs[1]) != T * h * d)
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.split_gate: outputs must hold a row per input row");
    const auto* in = static_cast<const float*>(args->inputs[0]->data);
    auto* q = static_cast<float*>(args->outputs[0]->data);
    auto* gate = static_cast<float*>(args->outputs[1]->data);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < h; ++i) {
        std::memcpy(q + (t * h + i) * d, in + (t * h + i) * 2 * d, static_cast<size_t>(d) * 4);
        std::memcpy(gate + (t * h + i) * d, in + (t * h + i) * 2 * d + d, static_cast<size_t>(d) * 4);
      }
    return MEMRA_OK;
  });
}

// ---- qwen3next.sigmoid_mul --------------------------------------------------------------

memra_status sigmoid_mul_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (args->num_inputs != 2 || args->num_outputs != 1)
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.sigmoid_mul: takes x and gate, gives one output");
    const int64_t n = last_dim(args->inputs[0]), rows = n > 0 ? numel(args->inputs[0]) / n : 0, gw = last_dim(args->inputs[1]);
    if ((gw != n && gw != 1) || numel(args->inputs[1]) != rows * gw || numel(args->outputs[0]) != rows * n)
      return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.sigmoid_mul: gate must be [T][n] or [T][1] and y like x");
    const auto* x = static_cast<const float*>(args->inputs[0]->data);
    const auto* g = static_cast<const float*>(args->inputs[1]->data);
    auto* y = static_cast<float*>(args->outputs[0]->data);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < n; ++i) y[t * n + i] = x[t * n + i] * sigmoid(g[t * gw + (gw == 1 ? 0 : i)]);
    return MEMRA_OK;
  });
}

const memra_op_def kOps[] = {
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_GDN, 1u, sizeof(GdnAttrsV1), MEMRA_OP_NEEDS_BATCH | MEMRA_OP_USES_STATE,
     "Gated DeltaNet core: causal conv + SiLU, l2-normed q/k, gated delta rule, gated RMSNorm (state qwen3next.gdn.v1)",
     gdn_cpu, nullptr, nullptr, nullptr},
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_SPLIT_GATE, 1u, sizeof(SplitGateAttrsV1), 0u,
     "gated attention: per-head [q | gate] rows into q and gate", split_gate_cpu, nullptr, nullptr, nullptr},
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_SIGMOID_MUL, 1u, sizeof(SigmoidMulAttrsV1), 0u,
     "x * sigmoid(gate), the gate per element or per row", sigmoid_mul_cpu, nullptr, nullptr, nullptr},
};

}  // namespace

uint64_t gdn_state_bytes(const GdnAttrsV1& a) {
  if (a.conv_kernel < 1 || a.num_v_heads <= 0) return 0;
  const uint64_t c_dim = 2ull * a.num_k_heads * a.head_k_dim + static_cast<uint64_t>(a.num_v_heads) * a.head_v_dim;
  return 4ull * (static_cast<uint64_t>(a.conv_kernel - 1) * c_dim + static_cast<uint64_t>(a.num_v_heads) * a.head_k_dim * a.head_v_dim);
}

std::span<const memra_op_def> op_defs() { return kOps; }

}  // namespace memra::qwen3next
