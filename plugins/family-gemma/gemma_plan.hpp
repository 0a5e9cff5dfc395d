// The gemma family's model plan: which tensors a config needs, with shapes, the
// hyper-parameters the forward pass reads, and the state contract (one PAGED_KV group for
// the sliding layers with their window, one for the full-attention layers). Built from the
// normalised config JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memra/backend.h"
#include "memra/family.h"
#include "family_plan.hpp"

namespace memra::gemma {

using TensorSpec = family::TensorSpec;

struct Plan {
  std::string architecture;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float norm_eps = 1e-6f;
  float norm_unit = 1.0f;          // RMSNorms scale by (norm_unit + w): 1 as trained (Gemma3RMSNorm)
  float embedding_scale = 1.0f;    // sqrt(hidden_size)
  float attention_scale = 0.0f;    // query_pre_attn_scalar^-0.5
  float attn_softcap = 0.0f;       // 0 = none
  float final_softcap = 0.0f;      // 0 = none (else the gemma.softcap op on the logits)
  bool attention_bias = false;
  bool tied_embeddings = true;
  std::string layer_types_from;    // where the layer kinds came from (the normalised config's note)
  std::vector<int32_t> layer_window;  // per layer: 0 = full attention, N = sliding window
  memra_rope_params rope_global{}, rope_local{};
  std::vector<TensorSpec> tensors;
  // The state contract (memra_plan_info): one PAGED_KV group per distinct window.
  std::vector<std::vector<int32_t>> group_layers;
  std::vector<memra_state_group> groups;  // .layers point into group_layers
  std::vector<memra_op_requirement> required_ops;
  memra_plan_info info{};
};

// Parses the normalised config; on failure returns false and sets `error`.
bool plan_from_config(const char* config_json, Plan& plan, std::string& error);
// Fills plan.groups, required_ops and info (pointers into `plan`: call again after copying it).
void plan_bind_state(Plan& plan);
std::string plan_to_json(const Plan& plan);

}  // namespace memra::gemma
