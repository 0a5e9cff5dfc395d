// The llama family's model plan: which tensors a config needs, with shapes, and
// the hyper-parameters the forward pass reads. Built from the normalised config JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memra/backend.h"
#include "memra/family.h"
#include "family_plan.hpp"

namespace memra::llama {

using TensorSpec = family::TensorSpec;

struct Plan {
  std::string architecture;
  int64_t vocab = 0, hidden = 0, intermediate = 0, layers = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float norm_eps = 1e-6f;
  bool attention_bias = false;  // q/k/v biases (Qwen2)
  bool attention_output_bias = false;
  bool qk_norm = false;         // per-head RMSNorm of q and k before RoPE (Qwen3)
  bool tied_embeddings = false;
  std::vector<int32_t> layer_window;  // per layer: 0 = full attention, N = sliding window (Mistral, Qwen2/3)
  memra_rope_params rope{};
  // Sparse MLPs (Qwen3-MoE): per layer whether its MLP is the moe_ffn op over `experts`
  // experts of width expert_width, top_k per token; the dense layers keep `intermediate`.
  std::vector<uint8_t> layer_moe;
  int32_t experts = 0, top_k = 0;
  int64_t expert_width = 0;
  bool normalize_top_k = false;
  std::vector<TensorSpec> tensors;
  // The state contract (memra_plan_info): one PAGED_KV group per distinct window.
  std::vector<std::vector<int32_t>> group_layers;
  std::vector<memra_state_group> groups;  // .layers point into group_layers
  std::vector<memra_op_requirement> required_ops;
  memra_plan_info info{};
};

// Parses the normalised config; on failure returns false and sets `error`.
bool plan_from_config(const char* config_json, Plan& plan, std::string& error);
// Fills plan.groups, required_ops and info from the layers (pointers into `plan`: call again after moving it).
void plan_bind_state(Plan& plan);
std::string plan_to_json(const Plan& plan);

}  // namespace memra::llama
