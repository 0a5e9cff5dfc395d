// The gemma forward pass (transformers' Gemma3ForCausalLM): the token embedding times
// sqrt(hidden); per layer a (1 + w) RMSNorm, attention (per-head (1 + w) RMSNorms of q and k
// before RoPE, the sliding or global RoPE base, scale query_pre_attn_scalar^-0.5, the
// layer's window, soft-capped scores when the config says), a (1 + w) RMSNorm of its output,
// the residual, a (1 + w) RMSNorm, the GELU-tanh gated MLP, a (1 + w) RMSNorm of its output,
// the residual; then the final (1 + w) RMSNorm, the (tied) head and, when the config has
// final_logit_softcapping, the gemma.softcap op on the logits. Every norm is computed in
// float32, as Gemma3RMSNorm does (x * rsqrt(mean(x^2) + eps) * (1 + w)).
#include "gemma_forward.hpp"

#include <unordered_map>

#include "gemma_ops.hpp"
#include "memra/ops.h"

namespace memra::gemma {
namespace {

#define GEMMA_OP(call, what)                                         \
  do {                                                               \
    const memra_status st_ = (call);                                 \
    if (st_ != MEMRA_OK) {                                           \
      error = std::string("gemma forward: ") + (what) + " failed";   \
      return st_;                                                    \
    }                                                                \
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
  m.layers.resize(static_cast<size_t>(p.layers));
  for (int64_t l = 0; l < p.layers; ++l) {
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
    L.post_attn_norm = get(b + "post_attention_norm.weight");
    L.ffn_norm = get(b + "ffn_norm.weight");
    L.w_gate = get(b + "ffn_gate.weight");
    L.w_up = get(b + "ffn_up.weight");
    L.w_down = get(b + "ffn_down.weight");
    L.post_ffw_norm = get(b + "post_ffw_norm.weight");
  }
  if (p.final_softcap > 0) {
    const memra_backend_ops& o = *m.ops;
    if (!MEMRA_STRUCT_HAS(&o, memra_backend_ops, op_run) || !o.op_find || o.op_find(o.ctx, GEMMA_OP_SOFTCAP, 1u, &m.softcap) != MEMRA_OK) {
      error = "this backend cannot run op '" GEMMA_OP_SOFTCAP "', which the model's final_logit_softcapping needs";
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
  // layer 0 continues from the residual stream and the last layer's normed MLP output (carry
  // 0 and 1); one before the end leaves them, so the stages together run exactly the ops one
  // backend runs.
  int64_t first = 0, last = 0;
  if (const memra_status st = family::layer_range(batch, p.layers, "gemma forward", first, last, error); st != MEMRA_OK) return st;

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
  memra_tensor residual, h, q, k, v, attn, proj, gate, up, act, down;
  GEMMA_OP(make(T, p.hidden, residual), "alloc");
  GEMMA_OP(make(T, p.hidden, h), "alloc");
  GEMMA_OP(make(T, q_width, q), "alloc");
  GEMMA_OP(make(T, kv_width, k), "alloc");
  GEMMA_OP(make(T, kv_width, v), "alloc");
  GEMMA_OP(make(T, q_width, attn), "alloc");
  GEMMA_OP(make(T, p.hidden, proj), "alloc");
  GEMMA_OP(make(T, p.intermediate, gate), "alloc");
  GEMMA_OP(make(T, p.intermediate, up), "alloc");
  GEMMA_OP(make(T, p.intermediate, act), "alloc");
  GEMMA_OP(make(T, p.hidden, down), "alloc");

  if (first == 0) {
    GEMMA_OP(o.embedding(c, m.token_embd, &batch, p.embedding_scale, &residual), "embedding");
    GEMMA_OP(o.rms_norm(c, &residual, m.layers[0].attn_norm, p.norm_eps, p.norm_unit, &h), "attn_norm");
  } else {
    residual = batch.carry_in[0];
    down = batch.carry_in[1];
    GEMMA_OP(o.add_rms_norm(c, &down, &residual, m.layers[static_cast<size_t>(first)].attn_norm, p.norm_eps, p.norm_unit, &h), "norm");
  }

  memra_attention_params ap{};
  ap.struct_size = MEMRA_ATTENTION_PARAMS_STRUCT_SIZE;
  ap.num_heads = static_cast<int32_t>(p.heads);
  ap.num_kv_heads = static_cast<int32_t>(p.kv_heads);
  ap.head_dim = static_cast<int32_t>(p.head_dim);
  ap.scale = p.attention_scale;
  ap.logit_softcap = p.attn_softcap;
  // The q/k norms are (1 + w): run below as rms_norm with the unit offset (attention's own
  // q_norm / k_norm have none), so they stay NULL here.

  for (int64_t l = first; l < last; ++l) {
    const Layer& L = m.layers[static_cast<size_t>(l)];
    const int32_t window = p.layer_window[static_cast<size_t>(l)];
    GEMMA_OP(o.matmul(c, &h, L.wq, L.bq, &q), "attn_q");
    GEMMA_OP(o.matmul(c, &h, L.wk, L.bk, &k), "attn_k");
    GEMMA_OP(o.matmul(c, &h, L.wv, L.bv, &v), "attn_v");
    memra_tensor qh = view(q, T * p.heads, p.head_dim), kh = view(k, T * p.kv_heads, p.head_dim);
    GEMMA_OP(o.rms_norm(c, &qh, L.q_norm, p.norm_eps, p.norm_unit, &qh), "attn_q_norm");
    GEMMA_OP(o.rms_norm(c, &kh, L.k_norm, p.norm_eps, p.norm_unit, &kh), "attn_k_norm");
    ap.layer = static_cast<int32_t>(l);
    ap.sliding_window = window;
    ap.rope = window > 0 ? &p.rope_local : &p.rope_global;
    GEMMA_OP(o.attention(c, &ap, &batch, &q, &k, &v, &attn), "attention");
    GEMMA_OP(o.matmul(c, &attn, L.wo, L.bo, &proj), "attn_output");
    GEMMA_OP(o.rms_norm(c, &proj, L.post_attn_norm, p.norm_eps, p.norm_unit, &proj), "post_attention_norm");
    GEMMA_OP(o.add_rms_norm(c, &proj, &residual, L.ffn_norm, p.norm_eps, p.norm_unit, &h), "ffn_norm");
    GEMMA_OP(o.matmul(c, &h, L.w_gate, nullptr, &gate), "ffn_gate");
    GEMMA_OP(o.matmul(c, &h, L.w_up, nullptr, &up), "ffn_up");
    GEMMA_OP(o.gated_activation(c, MEMRA_ACTIVATION_GELU_TANH, &gate, &up, &act), "gelu_tanh");
    GEMMA_OP(o.matmul(c, &act, L.w_down, nullptr, &down), "ffn_down");
    GEMMA_OP(o.rms_norm(c, &down, L.post_ffw_norm, p.norm_eps, p.norm_unit, &down), "post_ffw_norm");
    if (l + 1 == last && last < p.layers) {
      batch.carry_out[0] = residual;
      batch.carry_out[1] = down;
      *batch.num_carry_out = 2;
      return MEMRA_OK;
    }
    const memra_weight* next_norm = l + 1 < p.layers ? m.layers[static_cast<size_t>(l + 1)].attn_norm : m.output_norm;
    GEMMA_OP(o.add_rms_norm(c, &down, &residual, next_norm, p.norm_eps, p.norm_unit, &h), "norm");
  }

  if (batch.num_logits <= 0) return MEMRA_OK;
  memra_tensor rows, logits;
  GEMMA_OP(make(batch.num_logits, p.hidden, rows), "alloc");
  GEMMA_OP(o.gather_logit_rows(c, &h, &batch, &rows), "gather_logit_rows");
  // Embeddings (ABI 2.3): the normed rows themselves, no output matmul.
  if (batch.struct_size >= MEMRA_STRUCT_SIZE(memra_forward_batch, row_output) && batch.row_output == MEMRA_ROW_OUTPUT_HIDDEN) {
    GEMMA_OP(o.logits_output(c, &rows, &batch), "logits_output (hidden rows)");
    return MEMRA_OK;
  }
  GEMMA_OP(make(batch.num_logits, p.vocab, logits), "alloc");
  GEMMA_OP(o.matmul(c, &rows, m.output, nullptr, &logits), "output");
  if (m.softcap) {
    const SoftcapAttrsV1 attrs{sizeof(SoftcapAttrsV1), p.final_softcap};
    memra_op_args a = family::op_args(-1, 1u, attrs, nullptr);
    const memra_tensor* in[1] = {&logits};
    memra_tensor* out[1] = {&logits};
    a.num_inputs = 1, a.inputs = in, a.num_outputs = 1, a.outputs = out;
    GEMMA_OP(o.op_run(c, m.softcap, &a), "final logit softcap");
  }
  GEMMA_OP(o.logits_output(c, &logits, &batch), "logits_output");
  return MEMRA_OK;
}

}  // namespace memra::gemma
