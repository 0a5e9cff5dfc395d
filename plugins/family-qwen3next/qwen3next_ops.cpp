// CPU references of the family's ops (qwen3next_ops.hpp states each contract).
#include "qwen3next_ops.hpp"

#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "family_plugin_support.hpp"
#include "qwen3next_math.h"

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

// An f32 weight of at least n elements.
const float* f32_weight(const memra_weight* w, int64_t n) {
  if (!w || !w->data || w->dtype != MEMRA_DTYPE_F32 || w->bytes < static_cast<uint64_t>(n) * 4) return nullptr;
  return static_cast<const float*>(w->data);
}

// ---- qwen3next.gated_delta_net ----------------------------------------------------------

}  // namespace

memra_status gdn_check(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  const auto& at = *static_cast<const GdnAttrsV1*>(args->attrs);
  const int64_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, kc = at.conv_kernel;
  if (hk <= 0 || hv <= 0 || hv % hk != 0 || dk <= 0 || dk > 256 || dv <= 0 || kc < 1 || kc > QWEN3NEXT_GDN_MAX_CONV || !(at.norm_eps > 0) ||
      (at.layout & ~QWEN3NEXT_GDN_FLAGS) != 0)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: bad attributes");
  const int64_t kd = hk * dk, vd = hv * dv, c_dim = 2 * kd + vd, T = args->batch->num_tokens;
  auto is = [&](int32_t i, int64_t width) { return last_dim(args->inputs[i]) == width && numel(args->inputs[i]) == T * width; };
  const bool split_qkvz = at.layout & QWEN3NEXT_GDN_SPLIT_QKVZ, split_ba = at.layout & QWEN3NEXT_GDN_SPLIT_BA;
  const int32_t want_inputs = 2 + (split_qkvz ? 1 : 0) + (split_ba ? 1 : 0);
  bool inputs_fit = args->num_inputs == want_inputs;
  if (inputs_fit) {
    int32_t i = 0;
    inputs_fit = split_qkvz ? is(i, c_dim) && is(i + 1, vd) : is(i, 2 * kd + 2 * vd);
    i += split_qkvz ? 2 : 1;
    inputs_fit = inputs_fit && (split_ba ? is(i, hv) && is(i + 1, hv) : is(i, 2 * hv));
  }
  if (!inputs_fit || args->num_outputs != 1 || args->num_weights != 4 || numel(args->outputs[0]) != T * vd)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT,
                  "qwen3next.gated_delta_net: takes qkvz [T][2*Hk*dk + 2*Hv*dv] or qkv [T][C] and z [T][Hv*dv], then ba "
                  "[T][2*Hv] or b and a [T][Hv] (as attrs.layout says), 4 weights and y [T][Hv*dv]");
  if (env->state_stride < gdn_state_bytes(at))
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.gated_delta_net: the layer keeps less state than these sizes need");
  const memra_weight* cw = args->weights[0];
  const float* a_log = f32_weight(args->weights[1], hv);
  const float* dt_bias = f32_weight(args->weights[2], hv);
  const float* norm_w = f32_weight(args->weights[3], dv);
  const uint64_t elem = cw && cw->dtype == MEMRA_DTYPE_F32 ? 4 : 2;
  if (!cw || !cw->data || (cw->dtype != MEMRA_DTYPE_F32 && cw->dtype != MEMRA_DTYPE_BF16 && cw->dtype != MEMRA_DTYPE_F16) ||
      cw->bytes < static_cast<uint64_t>(c_dim * kc) * elem || !a_log || !dt_bias || !norm_w)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT,
                  "qwen3next.gated_delta_net: the conv kernel must be f32/bf16/f16 [C][K] and A (or A_log), dt_bias, norm f32");
  return MEMRA_OK;
}

namespace {

memra_status gdn_cpu(memra_plugin_ctx* ctx, const memra_op_env* env, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = gdn_check(ctx, env, args); st != MEMRA_OK) return st;
    const auto& at = *static_cast<const GdnAttrsV1*>(args->attrs);
    const int64_t hk = at.num_k_heads, hv = at.num_v_heads, dk = at.head_k_dim, dv = at.head_v_dim, kc = at.conv_kernel;
    const int64_t kd = hk * dk, vd = hv * dv, c_dim = 2 * kd + vd, T = args->batch->num_tokens;
    const memra_weight* cw = args->weights[0];
    const float* a_weight = static_cast<const float*>(args->weights[1]->data);
    const float* dt_bias = static_cast<const float*>(args->weights[2]->data);
    const float* norm_w = static_cast<const float*>(args->weights[3]->data);
    const q3n_sources src = sources_of(at, args);
    auto* y = static_cast<float*>(args->outputs[0]->data);
    const int32_t* snaps = MEMRA_STRUCT_HAS(env, memra_op_env, snapshot_slots) ? env->snapshot_slots : nullptr;
    const uint64_t state_bytes = gdn_state_bytes(at);
    std::vector<float> conv(static_cast<size_t>(c_dim)), qn(static_cast<size_t>(kd)), kn(static_cast<size_t>(kd));
    const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
    // The sum over i < n of term(i) in the kernels' warp order (qwen3next_math.h).
    auto warp_sum = [](int64_t n, auto term) {
      float p[Q3N_LANES];
      for (int64_t l = 0; l < Q3N_LANES; ++l) {
        float acc = 0.0f;
        for (int64_t i = l; i < n; i += Q3N_LANES) acc = acc + term(i);
        p[l] = acc;
      }
      return q3n_butterfly(p);
    };
    // Token rows in batch order, each on its sequence's state, as the kernels take them: the
    // conv (each channel over its K-1 kept inputs and this one), q and k normalised per key
    // head, then each value head's state column by column, then the gated RMSNorm.
    for (int64_t t = 0; t < T; ++t) {
      char* slot = static_cast<char*>(env->state) + static_cast<uint64_t>(env->state_slots[env->seq_index[t]]) * env->state_stride;
      float* cstate = reinterpret_cast<float*>(slot);  // [K-1][C]
      float* S = cstate + (kc - 1) * c_dim;             // [Hv][dv][dk]: by column
      for (int64_t ch = 0; ch < c_dim; ++ch) {
        const float x = q3n_conv_in(&src, t, ch);
        float acc = 0.0f;
        for (int64_t k = 0; k < kc - 1; ++k) acc = acc + q3n_weight(cw->data, cw->dtype, ch * kc + k) * cstate[k * c_dim + ch];
        acc = acc + q3n_weight(cw->data, cw->dtype, ch * kc + kc - 1) * x;
        for (int64_t k = 0; k + 1 < kc - 1; ++k) cstate[k * c_dim + ch] = cstate[(k + 1) * c_dim + ch];
        if (kc > 1) cstate[(kc - 2) * c_dim + ch] = x;
        conv[static_cast<size_t>(ch)] = q3n_silu(acc);
      }
      for (int64_t g = 0; g < hk; ++g) {
        const float* qc = conv.data() + g * dk;
        const float* kc_row = conv.data() + kd + g * dk;
        const float sq = warp_sum(dk, [&](int64_t i) { return qc[i] * qc[i]; });
        const float sk = warp_sum(dk, [&](int64_t i) { return kc_row[i] * kc_row[i]; });
        const float iq = 1.0f / std::sqrt(sq + 1e-6f), ik = 1.0f / std::sqrt(sk + 1e-6f);
        for (int64_t i = 0; i < dk; ++i) {
          qn[static_cast<size_t>(g * dk + i)] = qc[i] * iq * q_scale;
          kn[static_cast<size_t>(g * dk + i)] = kc_row[i] * ik;
        }
      }
      for (int64_t h = 0; h < hv; ++h) {
        const auto hh = static_cast<int32_t>(h);
        const float beta = q3n_sigmoid(q3n_b_in(&src, t, h));
        const float decay = q3n_decay(&src, a_weight, hh, q3n_a_in(&src, t, h), dt_bias[h]);
        const float* kr = kn.data() + q3n_key_head(&src, hh) * dk;
        const float* qr = qn.data() + q3n_key_head(&src, hh) * dk;
        float* yh = y + t * vd + h * dv;
        for (int64_t j = 0; j < dv; ++j) {
          float* col = S + (h * dv + j) * dk;
          const float m = warp_sum(dk, [&](int64_t i) {
            col[i] = col[i] * decay;
            return col[i] * kr[i];
          });
          const float d = (conv[static_cast<size_t>(2 * kd + h * dv + j)] - m) * beta;
          yh[j] = warp_sum(dk, [&](int64_t i) {
            col[i] = col[i] + kr[i] * d;
            return col[i] * qr[i];
          });
        }
        const float ss = warp_sum(dv, [&](int64_t j) { return yh[j] * yh[j]; });
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dv) + at.norm_eps);
        for (int64_t j = 0; j < dv; ++j) yh[j] = norm_w[j] * (yh[j] * inv) * q3n_silu(q3n_z_in(&src, t, h * dv + j));
      }
      if (snaps && snaps[t] >= 0)  // the state as it stands after this row
        std::memcpy(static_cast<char*>(env->state) + static_cast<uint64_t>(snaps[t]) * env->state_stride, slot, state_bytes);
    }
    return MEMRA_OK;
  });
}

// ---- qwen3next.split_gate ---------------------------------------------------------------

}  // namespace

memra_status split_gate_check(memra_plugin_ctx* ctx, const memra_op_args* args) {
  const auto& at = *static_cast<const SplitGateAttrsV1*>(args->attrs);
  const int64_t h = at.heads, d = at.head_dim;
  if (h <= 0 || d <= 0 || args->num_inputs != 1 || args->num_outputs != 2 || last_dim(args->inputs[0]) != 2 * h * d ||
      last_dim(args->outputs[0]) != h * d || last_dim(args->outputs[1]) != h * d)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.split_gate: takes [T][H*2*D] into two [T][H*D]");
  const int64_t T = numel(args->inputs[0]) / (2 * h * d);
  if (numel(args->outputs[0]) != T * h * d || numel(args->outputs[1]) != T * h * d)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.split_gate: outputs must hold a row per input row");
  return MEMRA_OK;
}

namespace {

memra_status split_gate_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = split_gate_check(ctx, args); st != MEMRA_OK) return st;
    const auto& at = *static_cast<const SplitGateAttrsV1*>(args->attrs);
    const int64_t h = at.heads, d = at.head_dim, T = numel(args->inputs[0]) / (2 * h * d);
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

}  // namespace

memra_status sigmoid_mul_check(memra_plugin_ctx* ctx, const memra_op_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.sigmoid_mul: takes x and gate, gives one output");
  const int64_t n = last_dim(args->inputs[0]), rows = n > 0 ? numel(args->inputs[0]) / n : 0, gw = last_dim(args->inputs[1]);
  if (n <= 0 || (gw != n && gw != 1) || numel(args->inputs[1]) != rows * gw || numel(args->outputs[0]) != rows * n)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.sigmoid_mul: gate must be [T][n] or [T][1] and y like x");
  return MEMRA_OK;
}

namespace {

memra_status sigmoid_mul_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = sigmoid_mul_check(ctx, args); st != MEMRA_OK) return st;
    const int64_t n = last_dim(args->inputs[0]), rows = numel(args->inputs[0]) / n, gw = last_dim(args->inputs[1]);
    const auto* x = static_cast<const float*>(args->inputs[0]->data);
    const auto* g = static_cast<const float*>(args->inputs[1]->data);
    auto* y = static_cast<float*>(args->outputs[0]->data);
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t i = 0; i < n; ++i) y[t * n + i] = x[t * n + i] * q3n_sigmoid(g[t * gw + (gw == 1 ? 0 : i)]);
    return MEMRA_OK;
  });
}

// ---- qwen3next.concat --------------------------------------------------------------------

}  // namespace

memra_status concat_check(memra_plugin_ctx* ctx, const memra_op_args* args) {
  if (args->num_inputs != 2 || args->num_outputs != 1)
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.concat: takes two inputs, gives one output");
  const int64_t a = last_dim(args->inputs[0]), b = last_dim(args->inputs[1]), rows = a > 0 ? numel(args->inputs[0]) / a : 0;
  if (a <= 0 || b <= 0 || numel(args->inputs[1]) != rows * b || last_dim(args->outputs[0]) != a + b ||
      numel(args->outputs[0]) != rows * (a + b))
    return report(ctx, MEMRA_ERR_INVALID_ARGUMENT, "qwen3next.concat: takes [T][A] and [T][B] into [T][A+B]");
  return MEMRA_OK;
}

namespace {

memra_status concat_cpu(memra_plugin_ctx* ctx, const memra_op_env*, const memra_op_args* args) {
  return guarded(ctx, [&]() -> memra_status {
    if (const memra_status st = concat_check(ctx, args); st != MEMRA_OK) return st;
    const int64_t a = last_dim(args->inputs[0]), b = last_dim(args->inputs[1]), rows = numel(args->inputs[0]) / a;
    const auto* x = static_cast<const float*>(args->inputs[0]->data);
    const auto* y = static_cast<const float*>(args->inputs[1]->data);
    auto* out = static_cast<float*>(args->outputs[0]->data);
    for (int64_t t = 0; t < rows; ++t) {
      std::memcpy(out + t * (a + b), x + t * a, static_cast<size_t>(a) * 4);
      std::memcpy(out + t * (a + b) + a, y + t * b, static_cast<size_t>(b) * 4);
    }
    return MEMRA_OK;
  });
}

// ---- memra-kernel-check's cases -----------------------------------------------------------

// A case's arrays, kept by the plugin context until shutdown.
struct CaseData {
  std::vector<int32_t> positions, seq_index;
  std::vector<int64_t> in_shapes, out_shapes, w_shapes;
  std::vector<std::vector<float>> inputs, weights;
  std::vector<const float*> in_ptrs, w_ptrs;
  GdnAttrsV1 gdn{};
  SplitGateAttrsV1 split{};
  SigmoidMulAttrsV1 sigmul{};
  ConcatAttrsV1 concat{};
};

std::vector<float> uniform(uint32_t seed, int64_t n, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t r = seed * 2654435761u + 12345u;
  for (float& x : v) {
    r = r * 1664525u + 1013904223u;
    x = lo + (hi - lo) * (static_cast<float>(r >> 8) / 16777216.0f);
  }
  return v;
}

// Rows of `seqs` sequences interleaved, each in position order.
void interleave(CaseData& c, int32_t tokens, int32_t seqs) {
  std::vector<int32_t> next(static_cast<size_t>(seqs), 0);
  for (int32_t t = 0; t < tokens; ++t) {
    c.seq_index.push_back(t % seqs);
    c.positions.push_back(next[static_cast<size_t>(t % seqs)]++);
  }
}

// Rows of `seqs` sequences one after another (a prompt's rows, then decode rows): sequence 0
// takes all but 2 rows for each of the others.
void runs(CaseData& c, int32_t tokens, int32_t seqs) {
  for (int32_t s = 0; s < seqs; ++s)
    for (int32_t p = 0; p < (s == 0 ? tokens - 2 * (seqs - 1) : 2); ++p) {
      c.seq_index.push_back(s);
      c.positions.push_back(p);
    }
}

memra_status fill_case(memra_plugin_ctx* ctx, std::shared_ptr<CaseData> c, const char* label, const void* attrs, size_t attrs_size,
                       int32_t seqs, uint64_t state_bytes, float tolerance, memra_op_example* out) {
  for (const auto& v : c->inputs) c->in_ptrs.push_back(v.data());
  for (const auto& v : c->weights) c->w_ptrs.push_back(v.data());
  std::memset(out, 0, sizeof *out);
  out->struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
  out->label = label;
  out->attrs = attrs;
  out->attrs_size = attrs_size;
  out->num_tokens = static_cast<int32_t>(c->seq_index.size());
  out->num_seqs = seqs;
  out->positions = c->positions.data();
  out->seq_index = c->seq_index.data();
  out->state_bytes = state_bytes;
  out->num_inputs = static_cast<int32_t>(c->inputs.size());
  out->input_shapes = c->in_shapes.data();
  out->inputs = c->in_ptrs.data();
  out->num_outputs = static_cast<int32_t>(c->out_shapes.size() / 2);
  out->output_shapes = c->out_shapes.data();
  out->num_weights = static_cast<int32_t>(c->weights.size());
  out->weight_shapes = c->w_shapes.data();
  out->weights = c->w_ptrs.data();
  out->tolerance = tolerance;
  std::lock_guard lock(ctx->mu);
  ctx->owned.push_back(std::move(c));
  return MEMRA_OK;
}

memra_status gdn_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  return guarded(ctx, [&]() -> memra_status {
    struct Sizes {
      int32_t hk, hv, dk, dv, kc, tokens, seqs, layout;
      const char* label;
      bool in_runs = false;  // each sequence's rows together (runs), else interleaved
    };
    constexpr int32_t kSplit = QWEN3NEXT_GDN_SPLIT_QKVZ | QWEN3NEXT_GDN_SPLIT_BA;
    constexpr int32_t kGguf35 = kSplit | QWEN3NEXT_GDN_V_TILED | QWEN3NEXT_GDN_A_DIRECT;
    constexpr int32_t kGgufNext = QWEN3NEXT_GDN_SPLIT_QKVZ | QWEN3NEXT_GDN_A_DIRECT;
    static const Sizes kCases[] = {
        {1, 2, 8, 8, 4, 5, 2, 0, "grouped rows, Hk 1 / Hv 2 heads of 8, 5 rows of 2 sequences"},
        {2, 6, 128, 128, 4, 7, 3, 0, "grouped rows, Hk 2 / Hv 6 heads of 128, 7 rows of 3 sequences"},
        {2, 6, 128, 128, 4, 7, 3, kSplit, "split rows (Qwen3.5), Hk 2 / Hv 6 heads of 128, 7 rows of 3 sequences"},
        {2, 6, 128, 128, 4, 7, 3, kGguf35, "llama.cpp's Qwen3.5 (split, tiled value heads, A), Hk 2 / Hv 6 heads of 128"},
        {2, 4, 64, 64, 4, 6, 2, kGgufNext, "llama.cpp's Qwen3-Next (split qkv/z, grouped ba, A), Hk 2 / Hv 4 heads of 64"},
        {1, 2, 32, 12, 3, 43, 3, kSplit, "a 39-row prompt then 2 rows each of 2 sequences, Hk 1 / Hv 2, dk 32, dv 12, conv 3", true},
        {1, 1, 32, 32, QWEN3NEXT_GDN_MAX_CONV, 20, 1, kSplit, "20 rows of one sequence, the longest conv", true},
        {1, 2, 32, 16, 4, 6, 2, kGguf35, "a decode step's runs: 4 rows of one sequence, 2 of another, Hk 1 / Hv 2, dk 32, dv 16", true}};
    constexpr int32_t kNumCases = static_cast<int32_t>(sizeof kCases / sizeof kCases[0]);
    if (!out) return MEMRA_ERR_INVALID_ARGUMENT;
    if (index < 0 || index >= kNumCases) return MEMRA_ERR_NOT_FOUND;
    const Sizes& z = kCases[index];
    auto c = std::make_shared<CaseData>();
    c->gdn = {sizeof(GdnAttrsV1), z.hk, z.hv, z.dk, z.dv, z.kc, 1e-6f, z.layout};
    if (z.in_runs)
      runs(*c, z.tokens, z.seqs);
    else
      interleave(*c, z.tokens, z.seqs);
    const int64_t kd = static_cast<int64_t>(z.hk) * z.dk, vd = static_cast<int64_t>(z.hv) * z.dv, c_dim = 2 * kd + vd;
    if (z.layout & QWEN3NEXT_GDN_SPLIT_QKVZ) {
      c->inputs = {uniform(1, z.tokens * c_dim, -1.0f, 1.0f), uniform(11, z.tokens * vd, -1.0f, 1.0f)};
      c->in_shapes = {z.tokens, c_dim, z.tokens, vd};
    } else {
      c->inputs = {uniform(1, z.tokens * (2 * kd + 2 * vd), -1.0f, 1.0f)};
      c->in_shapes = {z.tokens, 2 * kd + 2 * vd};
    }
    if (z.layout & QWEN3NEXT_GDN_SPLIT_BA) {
      c->inputs.push_back(uniform(2, z.tokens * z.hv, -2.0f, 2.0f));
      c->inputs.push_back(uniform(12, z.tokens * z.hv, -2.0f, 2.0f));
      c->in_shapes.insert(c->in_shapes.end(), {z.tokens, z.hv, z.tokens, z.hv});
    } else {
      c->inputs.push_back(uniform(2, z.tokens * 2LL * z.hv, -2.0f, 2.0f));
      c->in_shapes.insert(c->in_shapes.end(), {z.tokens, 2LL * z.hv});
    }
    c->out_shapes = {z.tokens, vd};
    const bool a_direct = z.layout & QWEN3NEXT_GDN_A_DIRECT;  // A = -exp(A_log) < 0
    c->weights = {uniform(3, c_dim * z.kc, -0.5f, 0.5f), a_direct ? uniform(4, z.hv, -4.0f, -0.3f) : uniform(4, z.hv, -1.0f, 1.5f),
                  uniform(5, z.hv, -1.0f, 1.0f),
                  uniform(6, z.dv, 0.5f, 1.5f)};
    c->w_shapes = {c_dim, z.kc, 1, z.hv, 1, z.hv, 1, z.dv};
    const GdnAttrsV1* attrs = &c->gdn;
    return fill_case(ctx, c, z.label, attrs, sizeof(GdnAttrsV1), z.seqs, gdn_state_bytes(*attrs), 0.0f, out);
  });
}

memra_status split_gate_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  return guarded(ctx, [&]() -> memra_status {
    if (!out) return MEMRA_ERR_INVALID_ARGUMENT;
    if (index != 0) return MEMRA_ERR_NOT_FOUND;
    auto c = std::make_shared<CaseData>();
    c->split = {sizeof(SplitGateAttrsV1), 3, 64};
    interleave(*c, 5, 1);
    c->inputs = {uniform(7, 5 * 384, -1.0f, 1.0f)};
    c->in_shapes = {5, 384};
    c->out_shapes = {5, 192, 5, 192};
    const SplitGateAttrsV1* attrs = &c->split;
    return fill_case(ctx, c, "5 rows of 3 heads of 64", attrs, sizeof(SplitGateAttrsV1), 1, 0, 0.0f, out);
  });
}

memra_status sigmoid_mul_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  return guarded(ctx, [&]() -> memra_status {
    if (!out) return MEMRA_ERR_INVALID_ARGUMENT;
    if (index < 0 || index > 1) return MEMRA_ERR_NOT_FOUND;
    auto c = std::make_shared<CaseData>();
    c->sigmul = {sizeof(SigmoidMulAttrsV1)};
    interleave(*c, 6, 1);
    const int64_t gw = index == 0 ? 100 : 1;
    c->inputs = {uniform(8, 600, -3.0f, 3.0f), uniform(9, 6 * gw, -30.0f, 30.0f)};
    c->in_shapes = {6, 100, 6, gw};
    c->out_shapes = {6, 100};
    const SigmoidMulAttrsV1* attrs = &c->sigmul;
    return fill_case(ctx, c, index == 0 ? "a gate per element" : "a gate per row", attrs, sizeof(SigmoidMulAttrsV1), 1, 0, 0.0f,
                     out);
  });
}

memra_status concat_example(memra_plugin_ctx* ctx, int32_t index, memra_op_example* out) {
  return guarded(ctx, [&]() -> memra_status {
    if (!out) return MEMRA_ERR_INVALID_ARGUMENT;
    if (index != 0) return MEMRA_ERR_NOT_FOUND;
    auto c = std::make_shared<CaseData>();
    c->concat = {sizeof(ConcatAttrsV1)};
    interleave(*c, 7, 1);
    c->inputs = {uniform(13, 7 * 96, -2.0f, 2.0f), uniform(14, 7 * 160, -2.0f, 2.0f)};
    c->in_shapes = {7, 96, 7, 160};
    c->out_shapes = {7, 256};
    const ConcatAttrsV1* attrs = &c->concat;
    return fill_case(ctx, c, "7 rows of 96 and 160", attrs, sizeof(ConcatAttrsV1), 1, 0, 0.0f, out);
  });
}

const memra_op_def kOps[] = {
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_GDN, 1u, sizeof(GdnAttrsV1), MEMRA_OP_NEEDS_BATCH | MEMRA_OP_USES_STATE | MEMRA_OP_SNAPSHOTS,
     "Gated DeltaNet core: causal conv + SiLU, l2-normed q/k, gated delta rule, gated RMSNorm (state qwen3next.gdn.v2)",
     gdn_cpu, prepare_cuda, gdn_cuda, gdn_example},
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_SPLIT_GATE, 1u, sizeof(SplitGateAttrsV1), 0u,
     "gated attention: per-head [q | gate] rows into q and gate", split_gate_cpu, prepare_cuda, split_gate_cuda, split_gate_example},
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_SIGMOID_MUL, 1u, sizeof(SigmoidMulAttrsV1), 0u,
     "x * sigmoid(gate), the gate per element or per row", sigmoid_mul_cpu, prepare_cuda, sigmoid_mul_cuda, sigmoid_mul_example},
    {MEMRA_OP_DEF_STRUCT_SIZE, QWEN3NEXT_OP_CONCAT, 1u, sizeof(ConcatAttrsV1), 0u,
     "rows of two tensors side by side (the MTP head's input)", concat_cpu, prepare_cuda, concat_cuda, concat_example},
};

}  // namespace

uint64_t gdn_state_bytes(const GdnAttrsV1& a) {
  if (a.conv_kernel < 1 || a.num_v_heads <= 0) return 0;
  const uint64_t c_dim = 2ull * a.num_k_heads * a.head_k_dim + static_cast<uint64_t>(a.num_v_heads) * a.head_v_dim;
  return 4ull * (static_cast<uint64_t>(a.conv_kernel - 1) * c_dim + static_cast<uint64_t>(a.num_v_heads) * a.head_k_dim * a.head_v_dim);
}

std::span<const memra_op_def> op_defs() { return kOps; }

}  // namespace memra::qwen3next
