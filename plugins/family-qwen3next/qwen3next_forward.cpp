// The qwen3next forward pass (transformers' Qwen3NextForCausalLM): per layer a (1 + w)
// RMSNorm, the token mixer (Gated DeltaNet or gated full attention), the residual, a
// (1 + w) RMSNorm, the MLP (sparse with a sigmoid-gated shared expert, or dense) and the
// residual; then the final (1 + w) RMSNorm and the head.
#include "qwen3next_forward.hpp"

#include <cmath>
#include <unordered_map>

#include "memra/ops.h"

namespace memra::qwen3next {
namespace {

#define Q3N_OP(call, what)                                            \
  do {                                                                \
    const memra_status st_ = (call);                                  \
    if (st_ != MEMRA_OK) {                                            \
      error = std::string("qwen3next forward: ") + (what) + " failed"; \
      return st_;                                                     \
    }                                                                 \
  } while (0)

}  // namespace

bool model_bind(Model& m, const memra_weight_set& set, std::string& error) {
  std::unordered_map<std::string, const memra_weight*> by_name;
  if (!family::bind_tensors(m.plan.tensors, set, m.weights, by_name, error)) return false;
  auto get = [&](const std::string& n) -> const memra_weight* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : it->second;
  };
  const Plan& p = m.plan;
  m.token_embd = get("token_embd.weight");
  m.output_norm = get("output_norm.weight");
  m.output = p.tied_embeddings ? m.token_embd : get("output.weight");
  auto bind_layer = [&](Layer& L, const std::string& b, bool moe) {
    L.attn_norm = get(b + "attn_norm.weight");
    L.post_norm = get(b + "post_attention_norm.weight");
    L.ssm_in = get(b + "ssm_in.weight");
    L.ssm_ba = get(b + "ssm_ba.weight");
    L.ssm_out = get(b + "ssm_out.weight");
    L.ssm_qkv = get(b + "attn_qkv.weight");
    L.ssm_z = get(b + "attn_gate.weight");
    L.ssm_b = get(b + "ssm_beta.weight");
    L.ssm_a = get(b + "ssm_alpha.weight");
    L.gdn_weights[0] = get(b + "ssm_conv1d.weight");
    L.gdn_weights[1] = get(b + (p.gdn.layout & QWEN3NEXT_GDN_A_DIRECT ? "ssm_a" : "ssm_a_log"));
    L.gdn_weights[2] = get(b + "ssm_dt.bias");
    L.gdn_weights[3] = get(b + "ssm_norm.weight");
    L.wq = get(b + "attn_q.weight");
    L.wk = get(b + "attn_k.weight");
    L.wv = get(b + "attn_v.weight");
    L.bq = get(b + "attn_q.bias");
    L.bk = get(b + "attn_k.bias");
    L.bv = get(b + "attn_v.bias");
    L.q_norm = get(b + "attn_q_norm.weight");
    L.k_norm = get(b + "attn_k_norm.weight");
    L.wo = get(b + "attn_output.weight");
    L.w_gate = get(b + "ffn_gate.weight");
    L.w_up = get(b + "ffn_up.weight");
    L.w_down = get(b + "ffn_down.weight");
    if (!moe) return;
    L.router = get(b + "ffn_gate_inp.weight");
    // moe_ffn v2's weights: the stacked experts, then the shared expert and its gate.
    for (const char* kind : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) L.experts.push_back(get(b + kind + ".weight"));
    if (p.shared_width > 0)
      for (const char* kind : {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", "ffn_gate_inp_shexp"})
        L.experts.push_back(get(b + kind + ".weight"));
  };
  m.layers.resize(static_cast<size_t>(p.layers));
  for (int64_t l = 0; l < p.layers; ++l)
    bind_layer(m.layers[static_cast<size_t>(l)], "blk." + std::to_string(l) + ".", p.layer_moe[static_cast<size_t>(l)]);
  if (p.mtp_layers > 0) {
    bind_layer(m.mtp, p.mtp_prefix, p.experts > 0);
    m.mtp_eh = get(p.mtp_prefix + "nextn.eh_proj.weight");
    m.mtp_enorm = get(p.mtp_prefix + "nextn.enorm.weight");
    m.mtp_hnorm = get(p.mtp_prefix + "nextn.hnorm.weight");
    m.mtp_norm = get(p.mtp_prefix + "nextn.shared_head_norm.weight");
  }
  const memra_backend_ops& o = *m.ops;
  if (!MEMRA_STRUCT_HAS(&o, memra_backend_ops, op_run) || !o.op_find) {
    error = "this backend has no ops by name (ABI 2.1)";
    return false;
  }
  struct Need {
    const char* name;
    uint32_t version;
    const memra_op** out;
    bool wanted;
  };
  for (const Need& n : {Need{QWEN3NEXT_OP_GDN, 1u, &m.gdn, !p.linear_layers.empty()},
                        Need{QWEN3NEXT_OP_SPLIT_GATE, 1u, &m.split_gate, !p.kv_layers.empty()},
                        Need{QWEN3NEXT_OP_CONCAT, 1u, &m.concat, p.mtp_layers > 0},
                        Need{QWEN3NEXT_OP_SIGMOID_MUL, 1u, &m.sigmoid_mul, true},
                        Need{MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, &m.moe_ffn, p.experts > 0}})
    if (n.wanted && o.op_find(o.ctx, n.name, n.version, n.out) != MEMRA_OK) {
      error = std::string("this backend cannot run op '") + n.name + "'";
      return false;
    }
  return true;
}

memra_status model_run(Model& m, const memra_forward_batch& batch, std::string& error) {
  const memra_backend_ops& o = *m.ops;
  memra_backend_ctx* c = o.ctx;
  const Plan& p = m.plan;
  const int64_t T = batch.num_tokens;
  if (batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, num_carry_out) && batch.layer_end > 0 &&
      (batch.layer_begin != 0 || batch.layer_end != p.layers)) {
    error = "qwen3next forward: layer ranges (pipeline stages) are not supported yet";
    return MEMRA_ERR_UNSUPPORTED;
  }
  const int64_t q_width = p.heads * p.head_dim, kv_width = p.kv_heads * p.head_dim;
  const GdnAttrsV1& g = p.gdn;
  const int64_t kd = static_cast<int64_t>(g.num_k_heads) * g.head_k_dim, vd = static_cast<int64_t>(g.num_v_heads) * g.head_v_dim;

  auto make = [&](int64_t rows, int64_t cols, memra_tensor& t) {
    const int64_t shape[2] = {rows, cols};
    return o.tensor_create(c, 2, shape, &t);
  };
  auto view = [](const memra_tensor& t, int64_t rows, int64_t cols) {
    memra_tensor v = t;
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    return v;
  };
  memra_tensor residual, h, mix, down;
  Q3N_OP(make(T, p.hidden, residual), "alloc");
  Q3N_OP(make(T, p.hidden, h), "alloc");
  Q3N_OP(make(T, p.hidden, mix), "alloc");
  Q3N_OP(make(T, p.hidden, down), "alloc");
  const bool split_qkvz = g.layout & QWEN3NEXT_GDN_SPLIT_QKVZ, split_ba = g.layout & QWEN3NEXT_GDN_SPLIT_BA;
  memra_tensor qkvz{}, zt{}, ba{}, at{}, y{};  // split: qkvz holds qkv, ba holds b
  if (!p.linear_layers.empty()) {
    Q3N_OP(make(T, split_qkvz ? 2 * kd + vd : 2 * kd + 2 * vd, qkvz), "alloc");
    Q3N_OP(make(T, split_ba ? g.num_v_heads : 2 * g.num_v_heads, ba), "alloc");
    if (split_qkvz) Q3N_OP(make(T, vd, zt), "alloc");
    if (split_ba) Q3N_OP(make(T, g.num_v_heads, at), "alloc");
    Q3N_OP(make(T, vd, y), "alloc");
  }
  const bool head = batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) && batch.head != 0;
  float* const hidden_out = batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, hidden_out) ? batch.hidden_out : nullptr;
  if (head && (batch.head != 1 || p.mtp_layers == 0 || !batch.hidden_in)) {
    error = "qwen3next forward: this model has no draft head " + std::to_string(batch.head) + " (or the batch no hidden_in rows)";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  if ((head || hidden_out) && (!MEMRA_STRUCT_HAS(&o, memra_backend_ops, rows_output) || !o.rows_input || !o.rows_output)) {
    error = "qwen3next forward: this backend cannot hand hidden rows over (ABI 2.9 rows_input / rows_output)";
    return MEMRA_ERR_UNSUPPORTED;
  }
  memra_tensor qg{}, q{}, gate{}, k{}, v{}, attn{};
  if (!p.kv_layers.empty()) {
    Q3N_OP(make(T, 2 * q_width, qg), "alloc");
    Q3N_OP(make(T, q_width, q), "alloc");
    Q3N_OP(make(T, q_width, gate), "alloc");
    Q3N_OP(make(T, kv_width, k), "alloc");
    Q3N_OP(make(T, kv_width, v), "alloc");
    Q3N_OP(make(T, q_width, attn), "alloc");
  }
  memra_tensor router_logits{}, fg{}, fu{}, fa{};
  if (p.experts > 0) Q3N_OP(make(T, p.experts, router_logits), "alloc");
  if (p.intermediate > 0) {
    Q3N_OP(make(T, p.intermediate, fg), "alloc");
    Q3N_OP(make(T, p.intermediate, fu), "alloc");
    Q3N_OP(make(T, p.intermediate, fa), "alloc");
  }

  memra_attention_params ap{};
  ap.struct_size = MEMRA_ATTENTION_PARAMS_STRUCT_SIZE;
  ap.num_heads = static_cast<int32_t>(p.heads);
  ap.num_kv_heads = static_cast<int32_t>(p.kv_heads);
  ap.head_dim = static_cast<int32_t>(p.head_dim);
  ap.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  ap.rope = &p.rope;
  const SplitGateAttrsV1 split{sizeof(SplitGateAttrsV1), static_cast<int32_t>(p.heads), static_cast<int32_t>(p.head_dim)};
  const SigmoidMulAttrsV1 sigmul{sizeof(SigmoidMulAttrsV1)};
  memra_moe_ffn_attrs_v2 moe_attrs{};
  moe_attrs.struct_size = MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE;
  moe_attrs.shared_expert = p.shared_width > 0 ? 1 : 0;
  moe_attrs.num_experts = p.experts;
  moe_attrs.top_k = p.top_k;
  moe_attrs.normalize_top_k = p.normalize_top_k ? 1 : 0;
  moe_attrs.activation = MEMRA_ACTIVATION_SILU;

  // One decoder layer from h (its input, normed) and residual to down (its MLP's output).
  auto layer_body = [&](const Layer& L, int32_t layer, bool linear) -> memra_status {
    if (linear) {
      memra_op_args a = family::op_args(layer, 1u, g, &batch);
      const memra_tensor* in[4] = {};  // in the op's order: qkvz or qkv, z; ba or b, a
      int32_t n_in = 0;
      if (split_qkvz) {
        Q3N_OP(o.matmul(c, &h, L.ssm_qkv, nullptr, &qkvz), "attn_qkv");
        Q3N_OP(o.matmul(c, &h, L.ssm_z, nullptr, &zt), "attn_gate");
        in[n_in++] = &qkvz, in[n_in++] = &zt;
      } else {
        Q3N_OP(o.matmul(c, &h, L.ssm_in, nullptr, &qkvz), "ssm_in");
        in[n_in++] = &qkvz;
      }
      if (split_ba) {
        Q3N_OP(o.matmul(c, &h, L.ssm_b, nullptr, &ba), "ssm_beta");
        Q3N_OP(o.matmul(c, &h, L.ssm_a, nullptr, &at), "ssm_alpha");
        in[n_in++] = &ba, in[n_in++] = &at;
      } else {
        Q3N_OP(o.matmul(c, &h, L.ssm_ba, nullptr, &ba), "ssm_ba");
        in[n_in++] = &ba;
      }
      memra_tensor* out[1] = {&y};
      a.num_inputs = n_in, a.inputs = in, a.num_outputs = 1, a.outputs = out;
      a.num_weights = 4, a.weights = L.gdn_weights;
      Q3N_OP(o.op_run(c, m.gdn, &a), "gated_delta_net");
      Q3N_OP(o.matmul(c, &y, L.ssm_out, nullptr, &mix), "ssm_out");
    } else {
      Q3N_OP(o.matmul(c, &h, L.wq, L.bq, &qg), "attn_q");
      Q3N_OP(o.matmul(c, &h, L.wk, L.bk, &k), "attn_k");
      Q3N_OP(o.matmul(c, &h, L.wv, L.bv, &v), "attn_v");
      {
        memra_op_args a = family::op_args(layer, 1u, split, nullptr);
        const memra_tensor* in[1] = {&qg};
        memra_tensor* out[2] = {&q, &gate};
        a.num_inputs = 1, a.inputs = in, a.num_outputs = 2, a.outputs = out;
        Q3N_OP(o.op_run(c, m.split_gate, &a), "split_gate");
      }
      // Per-head (1 + w) RMSNorms of q and k, before RoPE.
      memra_tensor qh = view(q, T * p.heads, p.head_dim), kh = view(k, T * p.kv_heads, p.head_dim);
      Q3N_OP(o.rms_norm(c, &qh, L.q_norm, p.norm_eps, p.norm_unit, &qh), "attn_q_norm");
      Q3N_OP(o.rms_norm(c, &kh, L.k_norm, p.norm_eps, p.norm_unit, &kh), "attn_k_norm");
      ap.layer = layer;
      Q3N_OP(o.attention(c, &ap, &batch, &q, &k, &v, &attn), "attention");
      {
        memra_op_args a = family::op_args(layer, 1u, sigmul, nullptr);
        const memra_tensor* in[2] = {&attn, &gate};
        memra_tensor* out[1] = {&attn};
        a.num_inputs = 2, a.inputs = in, a.num_outputs = 1, a.outputs = out;
        Q3N_OP(o.op_run(c, m.sigmoid_mul, &a), "attention output gate");
      }
      Q3N_OP(o.matmul(c, &attn, L.wo, nullptr, &mix), "attn_output");
    }
    Q3N_OP(o.add_rms_norm(c, &mix, &residual, L.post_norm, p.norm_eps, p.norm_unit, &h), "post_attention_norm");
    if (L.router) {
      Q3N_OP(o.matmul(c, &h, L.router, nullptr, &router_logits), "ffn_gate_inp");
      // The routed experts and the sigmoid-gated shared expert, one op (moe_ffn v2).
      memra_op_args a = family::op_args(layer, MEMRA_OP_MOE_FFN_V2, moe_attrs, &batch);
      const memra_tensor* in[2] = {&h, &router_logits};
      memra_tensor* out[1] = {&down};
      a.num_inputs = 2, a.inputs = in, a.num_outputs = 1, a.outputs = out;
      a.num_weights = static_cast<int32_t>(L.experts.size()), a.weights = L.experts.data();
      Q3N_OP(o.op_run(c, m.moe_ffn, &a), "moe_ffn");
    } else {
      Q3N_OP(o.matmul(c, &h, L.w_gate, nullptr, &fg), "ffn_gate");
      Q3N_OP(o.matmul(c, &h, L.w_up, nullptr, &fu), "ffn_up");
      Q3N_OP(o.gated_activation(c, MEMRA_ACTIVATION_SILU, &fg, &fu, &fa), "silu");
      Q3N_OP(o.matmul(c, &fa, L.w_down, nullptr, &down), "ffn_down");
    }
    return MEMRA_OK;
  };

  if (head) {
    // The MTP head: fc([enorm(embedding of the next token) | hnorm(the hidden state)]), its
    // gated attention layer (KV in layer `layers`), its own final norm; the model's head.
    memra_tensor e, hin, cat;
    Q3N_OP(make(T, p.hidden, e), "alloc");
    Q3N_OP(make(T, p.hidden, hin), "alloc");
    Q3N_OP(make(T, 2 * p.hidden, cat), "alloc");
    Q3N_OP(o.embedding(c, m.token_embd, &batch, 1.0f, &e), "embedding");
    Q3N_OP(o.rms_norm(c, &e, m.mtp_enorm, p.norm_eps, p.norm_unit, &e), "mtp enorm");
    Q3N_OP(o.rows_input(c, &batch, &hin), "mtp hidden rows");
    Q3N_OP(o.rms_norm(c, &hin, m.mtp_hnorm, p.norm_eps, p.norm_unit, &hin), "mtp hnorm");
    {
      const ConcatAttrsV1 cat_attrs{sizeof(ConcatAttrsV1)};
      memra_op_args a = family::op_args(static_cast<int32_t>(p.layers), 1u, cat_attrs, nullptr);
      const memra_tensor* in[2] = {&e, &hin};
      memra_tensor* out[1] = {&cat};
      a.num_inputs = 2, a.inputs = in, a.num_outputs = 1, a.outputs = out;
      Q3N_OP(o.op_run(c, m.concat, &a), "mtp concat");
    }
    Q3N_OP(o.matmul(c, &cat, m.mtp_eh, nullptr, &residual), "mtp eh_proj");
    Q3N_OP(o.rms_norm(c, &residual, m.mtp.attn_norm, p.norm_eps, p.norm_unit, &h), "mtp attn_norm");
    if (const memra_status st = layer_body(m.mtp, static_cast<int32_t>(p.layers), false); st != MEMRA_OK) return st;
    Q3N_OP(o.add_rms_norm(c, &down, &residual, m.mtp_norm, p.norm_eps, p.norm_unit, &h), "mtp shared_head_norm");
  } else {
    Q3N_OP(o.embedding(c, m.token_embd, &batch, 1.0f, &residual), "embedding");
    Q3N_OP(o.rms_norm(c, &residual, m.layers[0].attn_norm, p.norm_eps, p.norm_unit, &h), "attn_norm");
    for (int64_t l = 0; l < p.layers; ++l) {
      if (const memra_status st = layer_body(m.layers[static_cast<size_t>(l)], static_cast<int32_t>(l), p.layer_linear[static_cast<size_t>(l)]);
          st != MEMRA_OK)
        return st;
      const memra_weight* next_norm = l + 1 < p.layers ? m.layers[static_cast<size_t>(l + 1)].attn_norm : m.output_norm;
      Q3N_OP(o.add_rms_norm(c, &down, &residual, next_norm, p.norm_eps, p.norm_unit, &h), "norm");
    }
  }
  if (hidden_out) Q3N_OP(o.rows_output(c, &h, &batch), "hidden rows");

  if (batch.num_logits <= 0) return MEMRA_OK;
  memra_tensor rows, logits;
  Q3N_OP(make(batch.num_logits, p.hidden, rows), "alloc");
  Q3N_OP(o.gather_logit_rows(c, &h, &batch, &rows), "gather_logit_rows");
  if (batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, row_output) && batch.row_output == MEMRA_ROW_OUTPUT_HIDDEN) {
    Q3N_OP(o.logits_output(c, &rows, &batch), "hidden rows");  // embeddings: the normed rows
    return MEMRA_OK;
  }
  Q3N_OP(make(batch.num_logits, p.vocab, logits), "alloc");
  Q3N_OP(o.matmul(c, &rows, m.output, nullptr, &logits), "output");
  Q3N_OP(o.logits_output(c, &logits, &batch), "logits_output");
  return MEMRA_OK;
}

}  // namespace memra::qwen3next
