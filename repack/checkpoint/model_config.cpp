// Enum names and validation of a normalised config.
#include <algorithm>

#include "repack/checkpoint/model_config.hpp"

namespace memra {

const char* to_string(RopeScaling v) {
  switch (v) {
    case RopeScaling::none: return "none";
    case RopeScaling::linear: return "linear";
    case RopeScaling::llama3: return "llama3";
    case RopeScaling::yarn: return "yarn";
  }
  return "none";
}

const char* to_string(NormType v) { return v == NormType::layer_norm ? "layer_norm" : "rms_norm"; }

bool parse_rope_scaling(std::string_view s, RopeScaling* out) {
  for (auto v : {RopeScaling::none, RopeScaling::linear, RopeScaling::llama3, RopeScaling::yarn})
    if (s == to_string(v)) return *out = v, true;
  return false;
}

bool parse_norm_type(std::string_view s, NormType* out) {
  for (auto v : {NormType::rms_norm, NormType::layer_norm})
    if (s == to_string(v)) return *out = v, true;
  return false;
}

bool ModelConfig::moe_layer(int64_t layer) const {
  if (num_experts == 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return decoder_sparse_step <= 1 || (layer + 1) % decoder_sparse_step == 0;
}

Status validate(const ModelConfig& c) {
  auto bad = [&](const std::string& what) {
    return make_error(ErrorCode::invalid_argument, "model config (" + c.architecture + "): " + what);
  };
  if (c.architecture.empty() || c.family.empty()) return bad("architecture/family missing");
  if (c.vocab_size <= 0) return bad("vocab_size must be positive");
  if (c.hidden_size <= 0) return bad("hidden_size must be positive");
  if (c.num_layers <= 0) return bad("num_hidden_layers must be positive");
  if (c.num_heads <= 0 || c.num_kv_heads <= 0) return bad("attention head counts must be positive");
  if (c.num_heads % c.num_kv_heads != 0)
    return bad("num_attention_heads " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads " +
               std::to_string(c.num_kv_heads));
  if (c.head_dim <= 0) return bad("head_dim must be positive");
  if (c.intermediate_size < 0 || c.moe_intermediate_size < 0) return bad("negative MLP width");
  if (c.intermediate_size == 0 && c.num_experts == 0) return bad("intermediate_size must be positive for a dense model");
  if (c.num_experts < 0 || c.num_experts_per_tok < 0) return bad("negative expert counts");
  if (c.num_experts > 0 && (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts))
    return bad("num_experts_per_tok must be in 1.." + std::to_string(c.num_experts));
  if (c.num_experts > 0 && c.moe_intermediate_size <= 0) return bad("moe_intermediate_size must be positive");
  if (!(c.rope.theta > 0)) return bad("rope theta must be positive");
  if (!(c.rope.partial_rotary_factor > 0 && c.rope.partial_rotary_factor <= 1)) return bad("partial_rotary_factor must be in (0, 1]");
  if (c.rope.rotary_dim <= 0 || c.rope.rotary_dim > c.head_dim || c.rope.rotary_dim % 2 != 0)
    return bad("rotary_dim must be even and in 1..head_dim");
  if (c.rope.scaling != RopeScaling::none && !(c.rope.factor > 0)) return bad("rope scaling factor must be positive");
  if (!(c.norm_eps > 0)) return bad("norm eps must be positive");
  if (c.activation != "silu" && c.activation != "gelu_pytorch_tanh")
    return bad("activation '" + c.activation + "' is not supported; supported: silu, gelu_pytorch_tanh");
  if (c.eos_token_ids.empty()) return bad("no eos token id");
  for (int64_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) return bad("eos token id " + std::to_string(id) + " is outside the vocabulary");
  if (c.bos_token_id && (*c.bos_token_id < 0 || *c.bos_token_id >= c.vocab_size)) return bad("bos token id outside the vocabulary");
  return {};
}

}  // namespace memra
