// The qwen3next family's model plan: which tensors a config needs, with shapes, each
// layer's kind (Gated DeltaNet or gated full attention) and MLP (sparse or dense), and
// the state contract: PAGED_KV for the attention layers, RECURRENT (conv + delta-rule
// state) for the DeltaNet layers. Built from the normalised config JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memra/backend.h"
#include "memra/family.h"
#include "family_plan.hpp"
#include "qwen3next_ops.hpp"

namespace memra::qwen3next {

using TensorSpec = family::TensorSpec;

struct Plan {
  bool gguf_source = false;  // llama.cpp's form: the shared expert's gate a [hidden] vector
  std::string architecture;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float norm_eps = 1e-6f;
  float norm_unit = 1.0f;  // RMSNorms scale by (norm_unit + w): 1 as trained, 0 where a converter folded it in
  bool attention_bias = false;
  bool tied_embeddings = false;
  std::vector<uint8_t> layer_linear;  // per layer: 1 = Gated DeltaNet, 0 = gated full attention
  GdnAttrsV1 gdn{};                   // the DeltaNet sizes (every DeltaNet layer alike)
  memra_rope_params rope{};
  // Sparse MLPs: softmax top-k over `experts` of width expert_width, plus a sigmoid-gated
  // shared expert of width shared_width (0: none).
  std::vector<uint8_t> layer_moe;
  int32_t experts = 0, top_k = 0;
  int64_t expert_width = 0, shared_width = 0;
  bool normalize_top_k = false;
  // The MTP head: 0 or 1 layer (numbered `layers`), its tensors under mtp_prefix; why a
  // declared head is not there.
  int64_t mtp_layers = 0;
  std::string mtp_prefix, mtp_missing;
  std::vector<TensorSpec> tensors;
  // The state contract (memra_plan_info).
  std::vector<int32_t> attention_layers, linear_layers, kv_layers;
  std::vector<memra_state_group> groups;
  std::vector<memra_op_requirement> required_ops;
  memra_plan_info info{};
};

// Parses the normalised config; on failure returns false and sets `error`.
bool plan_from_config(const char* config_json, Plan& plan, std::string& error);
// Fills plan.groups, required_ops and info (pointers into `plan`: call again after copying it).
void plan_bind_state(Plan& plan);
std::string plan_to_json(const Plan& plan);

}  // namespace memra::qwen3next
