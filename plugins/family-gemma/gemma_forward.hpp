// The gemma family's forward pass, written against the backend op set and the family's own
// op (gemma_ops.hpp).
#pragma once

#include <string>
#include <vector>

#include "memra/backend.h"
#include "gemma_plan.hpp"

namespace memra::gemma {

struct Layer {
  const memra_weight *attn_norm = nullptr, *wq = nullptr, *wk = nullptr, *wv = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const memra_weight *q_norm = nullptr, *k_norm = nullptr, *wo = nullptr, *bo = nullptr, *post_attn_norm = nullptr;
  const memra_weight *ffn_norm = nullptr, *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr, *post_ffw_norm = nullptr;
};

struct Model {
  Plan plan;
  const memra_backend_ops* ops = nullptr;
  std::vector<memra_weight> weights;  // copies of the host's descriptors
  const memra_weight *token_embd = nullptr, *output_norm = nullptr, *output = nullptr;
  std::vector<Layer> layers;
  const memra_op* softcap = nullptr;  // found at bind when the plan soft-caps its logits
};

// Binds the host's weights to the plan (names the first missing or mismatched tensor).
bool model_bind(Model& m, const memra_weight_set& set, std::string& error);
memra_status model_run(Model& m, const memra_forward_batch& batch, std::string& error);

}  // namespace memra::gemma
