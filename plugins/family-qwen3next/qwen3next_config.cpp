// config_normalize for the qwen3next family: a Hugging Face config.json -> the
// normalised config (docs/FORMAT.md): the keys every family shares plus this family's
// own (layer kinds, Gated DeltaNet sizes, the gated attention, experts).
#include "qwen3next_config.hpp"

#include <vector>

#include "family_plugin_support.hpp"
#include "raw_config.hpp"

namespace memra::qwen3next {
namespace {

using family::Fields;
using family::json;
using family::RawConfig;

// HF class -> whether its DeltaNet projections are Qwen3.5's separate ones.
struct Arch {
  const char* hf;
  bool split_projections;
};
constexpr Arch kArchitectures[] = {
    {"Qwen3NextForCausalLM", false},
    {"Qwen3_5ForCausalLM", true},
    {"Qwen3_5MoeForCausalLM", true},
    {"Qwen3_5ForConditionalGeneration", true},  // the text part: the vision tower is not read yet
    {"Qwen3_5MoeForConditionalGeneration", true},
};

json from_hf(const RawConfig& raw, const Arch& arch) {
  const Fields c(raw.config, "config.json");
  json out;
  out["model_type"] = c.string("model_type", arch.split_projections ? "qwen3_5_text" : "qwen3_next");
  std::string dtype = c.string("dtype", "");
  if (dtype.empty()) dtype = c.string("torch_dtype", "");
  out["dtype"] = dtype;
  const int64_t hidden = c.integer("hidden_size", std::nullopt);
  const int64_t heads = c.integer("num_attention_heads", std::nullopt);
  if (heads <= 0) c.fail("num_attention_heads must be positive");
  const int64_t layers = c.integer("num_hidden_layers", std::nullopt);
  const int64_t head_dim = c.integer("head_dim", hidden / heads);
  const int64_t max_pos = c.integer("max_position_embeddings", 0);
  out["vocab_size"] = c.integer("vocab_size", std::nullopt);
  out["hidden_size"] = hidden;
  out["num_layers"] = layers;
  out["num_heads"] = heads;
  out["num_kv_heads"] = c.integer("num_key_value_heads", heads);
  out["head_dim"] = head_dim;
  out["intermediate_size"] = c.integer("intermediate_size", 0);
  out["max_position_embeddings"] = max_pos;
  out["norm_eps"] = c.number("rms_norm_eps", 1e-6);
  out["activation"] = c.string("hidden_act", "silu");
  out["attention_bias"] = c.boolean("attention_bias", false);
  out["tie_word_embeddings"] = c.boolean("tie_word_embeddings", false);
  // Layer kinds: the explicit list, else transformers' default (every
  // full_attention_interval-th layer full attention, the others linear).
  json kinds = json::array();
  if (const json* lt = c.find("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != layers)
      c.fail("'layer_types' must list one entry per layer (" + std::to_string(layers) + ")");
    kinds = *lt;
  } else {
    const int64_t interval = c.integer("full_attention_interval", 4);
    if (interval <= 0) c.fail("'full_attention_interval' must be positive");
    for (int64_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  out["layer_types"] = kinds;
  out["linear_num_key_heads"] = c.integer("linear_num_key_heads", std::nullopt);
  out["linear_num_value_heads"] = c.integer("linear_num_value_heads", std::nullopt);
  out["linear_key_head_dim"] = c.integer("linear_key_head_dim", std::nullopt);
  out["linear_value_head_dim"] = c.integer("linear_value_head_dim", std::nullopt);
  out["linear_conv_kernel_dim"] = c.integer("linear_conv_kernel_dim", 4);
  out["linear_projections"] = arch.split_projections ? "split" : "grouped";
  out["rope"] = family::hf_rope(c, 10000.0, head_dim, max_pos);
  out["num_experts"] = c.integer("num_experts", 0);
  out["num_experts_per_tok"] = c.integer("num_experts_per_tok", 0);
  out["moe_intermediate_size"] = c.integer("moe_intermediate_size", 0);
  out["shared_expert_intermediate_size"] = c.integer("shared_expert_intermediate_size", 0);
  out["norm_topk_prob"] = c.boolean("norm_topk_prob", true);
  out["decoder_sparse_step"] = c.integer("decoder_sparse_step", 1);
  json dense = json::array();
  if (const json* m = c.find("mlp_only_layers")) {
    if (!m->is_array()) c.fail("'mlp_only_layers' must be a list of layer indices");
    dense = *m;
  }
  out["mlp_only_layers"] = dense;
  family::hf_special_tokens(raw, out);
  return out;
}

}  // namespace

std::string normalize_config(const char* raw_json) {
  const RawConfig raw = family::parse_raw_config(raw_json);
  const Arch* arch = nullptr;
  for (const Arch& a : kArchitectures)
    if (raw.architecture == a.hf) arch = &a;
  if (raw.format != "hf")
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED, "GGUF architecture '" + raw.architecture +
                                                         "': family-qwen3next reads Hugging Face checkpoints only so far");
  if (!arch) {
    std::string served;
    for (const Arch& a : kArchitectures) served += (served.empty() ? "" : ", ") + std::string(a.hf);
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED,
                              "architecture '" + raw.architecture + "' is not one this family serves; it serves " + served);
  }
  json out = from_hf(raw, *arch);
  out["memra_config_version"] = family::kNormalisedConfigVersion;
  out["architecture"] = raw.architecture;
  out["family"] = "qwen3next";
  out["source_format"] = raw.format;
  return out.dump(1);
}

const char* const* handled_architectures() {
  static const char* const kHandles[] = {"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
                                         "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", nullptr};
  return kHandles;
}

}  // namespace memra::qwen3next
