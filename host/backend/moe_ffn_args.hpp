// moe_ffn.v1's argument checks (host/ops/op_registry.hpp's entry), the same on every
// backend that implements it: x [tokens][hidden] and the router logits
// [tokens][num_experts] in, y [tokens][hidden] out (not x), the batch, and 3 * num_experts
// expert matrices (gate, up, down per expert, each expert's three of one scheme).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/common/tensor_shape.hpp"
#include "memra/backend.h"
#include "memra/ops.h"

namespace memra::backend {

// "" when a's arguments fit the op, else why (MEMRA_ERR_INVALID_ARGUMENT).
inline std::string moe_ffn_args_error(const memra_op_args& a) {
  const auto& attrs = *static_cast<const memra_moe_ffn_attrs_v1*>(a.attrs);
  const int32_t experts = attrs.num_experts;
  if (experts <= 0 || attrs.top_k <= 0 || attrs.top_k > experts)
    return "moe_ffn: top_k must be in 1..num_experts (" + std::to_string(attrs.top_k) + " of " + std::to_string(experts) + ")";
  if (attrs.activation != MEMRA_ACTIVATION_SILU && attrs.activation != MEMRA_ACTIVATION_GELU_TANH)
    return "moe_ffn: unknown activation " + std::to_string(attrs.activation);
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
  if (a.num_weights != 3 * experts || !a.weights) return "moe_ffn: needs 3 * num_experts weights (gate, up, down)";
  for (int32_t e = 0; e < experts; ++e) {
    const memra_weight* g = a.weights[e];
    const memra_weight* u = a.weights[experts + e];
    const memra_weight* d = a.weights[2 * experts + e];
    if (!g || !u || !d || g->ndim != 2 || u->ndim != 2 || d->ndim != 2)
      return "moe_ffn: expert " + std::to_string(e) + " lacks a 2-D gate, up or down matrix";
    const int64_t width = g->shape[0];
    if (g->shape[1] != hidden || u->shape[0] != width || u->shape[1] != hidden || d->shape[0] != hidden ||
        d->shape[1] != width)
      return "moe_ffn: expert " + std::to_string(e) + "'s matrices are not [width][hidden], [width][hidden], [hidden][width]";
    if (std::strcmp(g->quant, u->quant) != 0 || std::strcmp(g->quant, d->quant) != 0)
      return "moe_ffn: expert " + std::to_string(e) + "'s three matrices are of different schemes";
  }
  return "";
}

}  // namespace memra::backend
