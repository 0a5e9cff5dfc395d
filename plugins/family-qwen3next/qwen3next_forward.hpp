// The qwen3next family's forward pass, written against the backend op set and the
// family's own ops (qwen3next_ops.hpp).
#pragma once

#include <string>
#include <vector>

#include "memra/backend.h"
#include "qwen3next_plan.hpp"

namespace memra::qwen3next {

struct Layer {
  const memra_weight* attn_norm = nullptr;
  const memra_weight* post_norm = nullptr;
  // Gated DeltaNet: the projections, then the op's weights (conv, A_log, dt_bias, norm).
  const memra_weight *ssm_in = nullptr, *ssm_ba = nullptr, *ssm_out = nullptr;  // grouped (Qwen3-Next)
  const memra_weight *ssm_qkv = nullptr, *ssm_z = nullptr, *ssm_b = nullptr, *ssm_a = nullptr;  // split (Qwen3.5)
  const memra_weight* gdn_weights[4] = {};
  // Gated attention.
  const memra_weight *wq = nullptr, *wk = nullptr, *wv = nullptr, *bq = nullptr, *bk = nullptr, *bv = nullptr;
  const memra_weight *q_norm = nullptr, *k_norm = nullptr, *wo = nullptr;
  // MLP: dense, or the router and moe_ffn v2's weights (stacked experts, the shared expert and its gate).
  const memra_weight *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;
  const memra_weight* router = nullptr;
  std::vector<const memra_weight*> experts;
};

struct Model {
  Plan plan;
  const memra_backend_ops* ops = nullptr;
  std::vector<memra_weight> weights;
  const memra_weight *token_embd = nullptr, *output_norm = nullptr, *output = nullptr;
  std::vector<Layer> layers;
  // The MTP head (plan.mtp_layers): fc over [enorm(embedding) | hnorm(hidden)], its layer, its norm.
  Layer mtp;
  const memra_weight *mtp_eh = nullptr, *mtp_enorm = nullptr, *mtp_hnorm = nullptr, *mtp_norm = nullptr;
  const memra_op *gdn = nullptr, *split_gate = nullptr, *sigmoid_mul = nullptr, *moe_ffn = nullptr, *concat = nullptr;
};

// Binds the host's weights to the plan (names the first missing or mismatched tensor).
bool model_bind(Model& m, const memra_weight_set& set, std::string& error);
memra_status model_run(Model& m, const memra_forward_batch& batch, std::string& error);

}  // namespace memra::qwen3next
