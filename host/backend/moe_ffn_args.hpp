// moe_ffn v2's argument checks (host/ops/op_registry.hpp's entry), the same on every
// backend that implements it: x [tokens][hidden] and the router logits
// [tokens][num_experts] in, y [tokens][hidden] out (not x), the batch, the stacked expert
// tensors gate_exps / up_exps [E][width][hidden] and down_exps [E][hidden][width] (one
// scheme), and with a shared expert its gate / up / down and its [1][hidden] gate.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/common/tensor_shape.hpp"
#include "memra/backend.h"
#include "memra/ops.h"

namespace memra::backend {

// Expert e's [rows][cols] slice of a stacked [E][rows][cols] weight: its bytes are the e-th
// of E equal parts (every row of a scheme takes the same bytes).
inline memra_weight moe_expert_slice(const memra_weight& w, int32_t e) {
  memra_weight s = w;
  const uint64_t bytes = w.bytes / static_cast<uint64_t>(w.shape[0]);
  s.ndim = 2;
  s.shape[0] = w.shape[1];
  s.shape[1] = w.shape[2];
  s.shape[2] = s.shape[3] = 0;
  s.bytes = bytes;
  s.data = static_cast<const uint8_t*>(w.data) + bytes * static_cast<uint64_t>(e);
  return s;
}

// The shared expert's gate as a [1][hidden] matrix (llama.cpp stores it as a [hidden] vector).
inline memra_weight moe_shared_gate_matrix(const memra_weight& w) {
  memra_weight m = w;
  if (w.ndim == 1) m.ndim = 2, m.shape[1] = w.shape[0], m.shape[0] = 1;
  return m;
}

// "" when a's arguments fit the op, else why (MEMRA_ERR_INVALID_ARGUMENT).
inline std::string moe_ffn_args_error(const memra_op_args& a) {
  const auto& attrs = *static_cast<const memra_moe_ffn_attrs_v2*>(a.attrs);
  const int32_t experts = attrs.num_experts;
  if (experts <= 0 || experts > MEMRA_MOE_FFN_MAX_EXPERTS)
    return "moe_ffn: num_experts must be in 1.." + std::to_string(MEMRA_MOE_FFN_MAX_EXPERTS) + " (" + std::to_string(experts) + ")";
  if (attrs.top_k <= 0 || attrs.top_k > experts || attrs.top_k > MEMRA_MOE_FFN_MAX_TOP_K)
    return "moe_ffn: top_k must be in 1..min(num_experts, " + std::to_string(MEMRA_MOE_FFN_MAX_TOP_K) + ") (" +
           std::to_string(attrs.top_k) + " of " + std::to_string(experts) + ")";
  if (attrs.activation != MEMRA_ACTIVATION_SILU && attrs.activation != MEMRA_ACTIVATION_GELU_TANH)
    return "moe_ffn: unknown activation " + std::to_string(attrs.activation);
  if (attrs.shared_expert != 0 && attrs.shared_expert != 1) return "moe_ffn: shared_expert must be 0 or 1";
  if (a.num_inputs != 2 || a.num_outputs != 1 || !a.inputs || !a.outputs || !a.inputs[0] || !a.inputs[1] || !a.outputs[0] ||
      !a.batch)
    return "moe_ffn: takes x and the router logits, one output and the batch";
  const memra_tensor* x = a.inputs[0];
  const memra_tensor* logits = a.inputs[1];
  const memra_tensor* y = a.outputs[0];
  const int64_t tokens = a.batch->num_tokens, hidden = tensor_last_dim(x);
  if (tensor_numel(x) != tokens * hidden || tensor_numel(y) != tokens * hidden || tensor_last_dim(y) != hidden)
    return "moe_ffn: x and y must be [tokens][hidden]";
  if (tensor_last_dim(logits) != experts || tensor_numel(logits) != tokens * experts)
    return "moe_ffn: the router logits must be [tokens][num_experts]";
  if (y->data == x->data) return "moe_ffn: y must not alias x";
  const int32_t want = attrs.shared_expert ? 7 : 3;
  if (a.num_weights != want || !a.weights)
    return "moe_ffn: needs " + std::to_string(want) + " weights (gate_exps, up_exps, down_exps" +
           (attrs.shared_expert ? ", the shared expert's gate, up, down and its gate)" : ")");
  const char* names[3] = {"gate_exps", "up_exps", "down_exps"};
  for (int i = 0; i < 3; ++i) {
    const memra_weight* w = a.weights[i];
    if (!w || w->ndim != 3 || w->shape[0] != experts || w->bytes % static_cast<uint64_t>(experts) != 0)
      return std::string("moe_ffn: ") + names[i] + " must be a stacked [num_experts][rows][cols] tensor of " + std::to_string(experts) +
             " experts";
  }
  const memra_weight& g = *a.weights[0];
  const memra_weight& u = *a.weights[1];
  const memra_weight& d = *a.weights[2];
  const int64_t width = g.shape[1];
  if (g.shape[2] != hidden || u.shape[1] != width || u.shape[2] != hidden || d.shape[1] != hidden || d.shape[2] != width)
    return "moe_ffn: the experts are not [E][width][hidden], [E][width][hidden], [E][hidden][width]";
  if (std::strcmp(g.quant, u.quant) != 0 || std::strcmp(g.quant, d.quant) != 0)
    return "moe_ffn: gate_exps, up_exps and down_exps are of different schemes";
  if (attrs.shared_expert) {
    const memra_weight* sg = a.weights[3];
    const memra_weight* su = a.weights[4];
    const memra_weight* sd = a.weights[5];
    const memra_weight* gi = a.weights[6];
    if (!sg || !su || !sd || !gi || sg->ndim != 2 || su->ndim != 2 || sd->ndim != 2 || gi->ndim < 1 || gi->ndim > 2)
      return "moe_ffn: the shared expert lacks a 2-D gate, up, down or gate_inp matrix";
    const int64_t sw = sg->shape[0];
    if (sg->shape[1] != hidden || su->shape[0] != sw || su->shape[1] != hidden || sd->shape[0] != hidden || sd->shape[1] != sw)
      return "moe_ffn: the shared expert's matrices are not [width][hidden], [width][hidden], [hidden][width]";
    if (std::strcmp(sg->quant, su->quant) != 0 || std::strcmp(sg->quant, sd->quant) != 0)
      return "moe_ffn: the shared expert's three matrices are of different schemes";
    if (gi->ndim == 2 ? gi->shape[0] != 1 || gi->shape[1] != hidden : gi->shape[0] != hidden || gi->dtype != MEMRA_DTYPE_F32)
      return "moe_ffn: the shared expert's gate must be a [1][hidden] matrix or an F32 [hidden] vector";
  }
  return "";
}

}  // namespace memra::backend
