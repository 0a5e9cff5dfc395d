#include "llama_forward.hpp"

#include <cmath>
#include <cstring>

#include "memra/ops.h"

namespace memra::llama {
namespace {

// Checks an op's status and returns from model_run with a message naming the op.
#define LLAMA_OP(call, what)                                  \
  do {                                                        \
    const memra_status st_ = (call);                          \
    if (st_ != MEMRA_OK) {                                    \
      error = std::string("llama forward: ") + (what) + " failed"; \
      return st_;                                             \
    }                                                         \
  } while (0)

}  // namespace

bool model_bind(Model& m, const memra_weight_set& set, std::string& error) {
  std::unordered_map<std::string, const memra_weight*> by_name;
  if (!family::bind_tensors(m.plan.tensors, set, m.weights, by_name, error)) return false;
  auto get = [&](const std::string& n) -> const memra_weight* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : it->second;
  };
  m.token_embd = get("token_embd.weight");
  m.output_norm = get("output_norm.weight");
  m.output = m.plan.tied_embeddings ? m.token_embd : get("output.weight");
  m.layers.resize(static_cast<size_t>(m.plan.layers));
  for (int64_t l = 0; l < m.plan.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    Layer& L = m.layers[static_cast<size_t>(l)];
    L.attn_norm = get(b + "attn_norm.weight");
    L.wq = get(b + "attn_q.weight");
    L.wk = get(b + "attn_k.weight");
    L.wv = get(b + "attn_v.weight");
    L.bq = get(b + "attn_q.bias");
    L.bk = get(b + "attn_k.bias");
    L.bv = get(b + "attn_v.bias");
    L.q_norm = get(b + "attn_q_norm.weight");
    L.k_norm = get(b + "attn_k_norm.weight");
    L.wo = get(b + "attn_output.weight");
    L.bo = get(b + "attn_output.bias");
    L.ffn_norm = get(b + "ffn_norm.weight");
    L.w_gate = get(b + "ffn_gate.weight");
    L.w_up = get(b + "ffn_up.weight");
    L.w_down = get(b + "ffn_down.weight");
    if (!m.plan.layer_moe[static_cast<size_t>(l)]) continue;
    L.router = get(b + "ffn_gate_inp.weight");
    for (const char* kind : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"}) L.experts.push_back(get(b + kind + ".weight"));
  }
  if (m.plan.experts > 0) {
    const memra_backend_ops& o = *m.ops;
    if (!MEMRA_STRUCT_HAS(&o, memra_backend_ops, op_run) || !o.op_find ||
        o.op_find(o.ctx, MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, &m.moe_ffn) != MEMRA_OK) {
      error = "this backend has no moe_ffn v2 op, which the model's sparse layers need";
      return false;
    }
  }
  return true;
}

memra_status model_run(Model& m, const memra_forward_batch& batch, std::string& error) {
  const memra_backend_ops& o = *m.ops;
  memra_backend_ctx* c = o.ctx;
  const Plan& p = m.plan;
  const int64_t T = batch.num_tokens;
  const int64_t q_width = p.heads * p.head_dim, kv_width = p.kv_heads * p.head_dim;
  // A layer range (ABI 2.2, a pipeline stage): layers [first, last) only. A range after
  // layer 0 continues from the residual stream and the last MLP output the range before
  // left (carry 0 and 1); one before the end leaves them, so the stages together run
  // exactly the ops one backend runs.
  int64_t first = 0, last = 0;
  if (const memra_status st = family::layer_range(batch, p.layers, "llama forward", first, last, error); st != MEMRA_OK) return st;

  auto make = [&](int64_t rows, int64_t cols, memra_tensor& t) {
    const int64_t shape[2] = {rows, cols};
    return o.tensor_create(c, 2, shape, &t);
  };
  memra_tensor residual, h, q, k, v, attn, proj, gate{}, up{}, act{}, down, router_logits{};
  LLAMA_OP(make(T, p.hidden, residual), "alloc");
  LLAMA_OP(make(T, p.hidden, h), "alloc");
  LLAMA_OP(make(T, q_width, q), "alloc");
  LLAMA_OP(make(T, kv_width, k), "alloc");
  LLAMA_OP(make(T, kv_width, v), "alloc");
  LLAMA_OP(make(T, q_width, attn), "alloc");
  LLAMA_OP(make(T, p.hidden, proj), "alloc");
  if (p.intermediate > 0) {  // a model whose every layer is sparse has no dense width
    LLAMA_OP(make(T, p.intermediate, gate), "alloc");
    LLAMA_OP(make(T, p.intermediate, up), "alloc");
    LLAMA_OP(make(T, p.intermediate, act), "alloc");
  }
  if (p.experts > 0) LLAMA_OP(make(T, p.experts, router_logits), "alloc");
  LLAMA_OP(make(T, p.hidden, down), "alloc");

  memra_moe_ffn_attrs_v2 moe{};
  moe.struct_size = MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE;
  moe.num_experts = p.experts;
  moe.top_k = p.top_k;
  moe.normalize_top_k = p.normalize_top_k ? 1 : 0;
  moe.activation = MEMRA_ACTIVATION_SILU;

  if (first == 0) {
    LLAMA_OP(o.embedding(c, m.token_embd, &batch, 1.0f, &residual), "embedding");
    LLAMA_OP(o.rms_norm(c, &residual, m.layers[0].attn_norm, p.norm_eps, 0.0f, &h), "attn_norm");
  } else {
    residual = batch.carry_in[0];
    down = batch.carry_in[1];
    LLAMA_OP(o.add_rms_norm(c, &down, &residual, m.layers[static_cast<size_t>(first)].attn_norm, p.norm_eps, 0.0f, &h), "norm");
  }

  memra_attention_params ap{};
  ap.struct_size = MEMRA_ATTENTION_PARAMS_STRUCT_SIZE;
  ap.num_heads = static_cast<int32_t>(p.heads);
  ap.num_kv_heads = static_cast<int32_t>(p.kv_heads);
  ap.head_dim = static_cast<int32_t>(p.head_dim);
  ap.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  ap.rope = &p.rope;
  ap.qk_norm_eps = p.norm_eps;

  for (int64_t l = first; l < last; ++l) {
    const Layer& L = m.layers[static_cast<size_t>(l)];
    LLAMA_OP(o.matmul(c, &h, L.wq, L.bq, &q), "attn_q");
    LLAMA_OP(o.matmul(c, &h, L.wk, L.bk, &k), "attn_k");
    LLAMA_OP(o.matmul(c, &h, L.wv, L.bv, &v), "attn_v");
    // Qwen3's per-head q/k norms run inside attention, before RoPE (ABI 2.4).
    ap.q_norm = p.qk_norm ? L.q_norm : nullptr;
    ap.k_norm = p.qk_norm ? L.k_norm : nullptr;
    ap.layer = static_cast<int32_t>(l);
    ap.sliding_window = p.layer_window[static_cast<size_t>(l)];
    LLAMA_OP(o.attention(c, &ap, &batch, &q, &k, &v, &attn), "attention");
    LLAMA_OP(o.matmul(c, &attn, L.wo, L.bo, &proj), "attn_output");
    LLAMA_OP(o.add_rms_norm(c, &proj, &residual, L.ffn_norm, p.norm_eps, 0.0f, &h), "ffn_norm");
    if (L.router) {
      LLAMA_OP(o.matmul(c, &h, L.router, nullptr, &router_logits), "ffn_gate_inp");
      const memra_tensor* in[2] = {&h, &router_logits};
      memra_tensor* out[1] = {&down};
      memra_op_args a = family::op_args(static_cast<int32_t>(l), MEMRA_OP_MOE_FFN_V2, moe, &batch);
      a.num_inputs = 2;
      a.num_outputs = 1;
      a.inputs = in;
      a.outputs = out;
      a.num_weights = static_cast<int32_t>(L.experts.size());
      a.weights = L.experts.data();
      LLAMA_OP(o.op_run(c, m.moe_ffn, &a), "moe_ffn");
    } else {
      LLAMA_OP(o.matmul(c, &h, L.w_gate, nullptr, &gate), "ffn_gate");
      LLAMA_OP(o.matmul(c, &h, L.w_up, nullptr, &up), "ffn_up");
      LLAMA_OP(o.gated_activation(c, MEMRA_ACTIVATION_SILU, &gate, &up, &act), "silu");
      LLAMA_OP(o.matmul(c, &act, L.w_down, nullptr, &down), "ffn_down");
    }
    if (l + 1 == last && last < p.layers) {
      batch.carry_out[0] = residual;
      batch.carry_out[1] = down;
      *batch.num_carry_out = 2;
      return MEMRA_OK;
    }
    const memra_weight* next_norm = l + 1 < p.layers ? m.layers[static_cast<size_t>(l + 1)].attn_norm : m.output_norm;
    LLAMA_OP(o.add_rms_norm(c, &down, &residual, next_norm, p.norm_eps, 0.0f, &h), "norm");
  }

  if (batch.num_logits <= 0) return MEMRA_OK;
  memra_tensor rows, logits;
  LLAMA_OP(make(batch.num_logits, p.hidden, rows), "alloc");
  LLAMA_OP(o.gather_logit_rows(c, &h, &batch, &rows), "gather_logit_rows");
  // Embeddings (ABI 2.3): the normed rows themselves, no output matmul.
  if (batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, row_output) && batch.row_output == MEMRA_ROW_OUTPUT_HIDDEN) {
    LLAMA_OP(o.logits_output(c, &rows, &batch), "logits_output (hidden rows)");
    return MEMRA_OK;
  }
  LLAMA_OP(make(batch.num_logits, p.vocab, logits), "alloc");
  LLAMA_OP(o.matmul(c, &rows, m.output, nullptr, &logits), "output");
  LLAMA_OP(o.logits_output(c, &logits, &batch), "logits_output");
  return MEMRA_OK;
}

}  // namespace memra::llama
