// The llama family's forward pass, written against the backend op set only.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "memra/backend.h"
#include "llama_plan.hpp"

namespace memra::llama {

struct Layer {
  const memra_weight *attn_norm, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *wo, *bo;
  const memra_weight *ffn_norm, *w_gate, *w_up, *w_down;
  // A sparse layer: the router and the stacked gate, up and down experts (moe_ffn v2's weights).
  const memra_weight* router = nullptr;
  std::vector<const memra_weight*> experts;
};

struct Model {
  Plan plan;
  const memra_backend_ops* ops = nullptr;
  std::vector<memra_weight> weights;  // copies of the host's descriptors (names point into host memory)
  const memra_weight* token_embd = nullptr;
  const memra_weight* output_norm = nullptr;
  const memra_weight* output = nullptr;
  std::vector<Layer> layers;
  const memra_op* moe_ffn = nullptr;  // found at bind when the plan has sparse layers
};

// Binds the host's weights to the plan; on failure sets `error` (names the tensor).
bool model_bind(Model& m, const memra_weight_set& set, std::string& error);
memra_status model_run(Model& m, const memra_forward_batch& batch, std::string& error);

}  // namespace memra::llama
