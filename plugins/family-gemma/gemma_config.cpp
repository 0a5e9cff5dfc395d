// config_normalize for the gemma family: a Hugging Face config.json (Gemma3TextConfig,
// transformers 4 or 5) -> the normalised config (docs/FORMAT.md): the keys every family
// shares plus this family's own (layer kinds and the window, the two RoPE bases, the
// attention scale, soft-caps, the embedding scale, (1 + w) norms).
//
// Layer kinds, as transformers' Gemma3TextConfig decides them: `layer_types` when the
// config lists them; else every sliding_window_pattern-th layer (1-based) is full attention
// and the others slide, the pattern from `sliding_window_pattern` (transformers 4) or
// `_sliding_window_pattern` (what transformers 5 writes beside layer_types); a config with
// neither gets transformers' default pattern, 6 — not silently: the normalised config says
// so in "layer_types_from" (and the plan's JSON repeats it), docs/PLUGINS.md "family-gemma".
#include "gemma_config.hpp"

#include <cmath>
#include <vector>

#include "family_plugin_support.hpp"
#include "raw_config.hpp"

namespace memra::gemma {
namespace {

using family::Fields;
using family::json;
using family::RawConfig;

struct Arch {
  const char* hf;
  const char* model_type;
};
constexpr Arch kArchitectures[] = {
    {"Gemma3ForCausalLM", "gemma3_text"},
};

// transformers' Gemma3TextConfig defaults: rope_theta 1e6 (global), 1e4 (local), the pattern 6.
constexpr double kGlobalTheta = 1'000'000.0;
constexpr double kLocalTheta = 10'000.0;
constexpr int64_t kDefaultPattern = 6;

json from_hf(const RawConfig& raw, const Arch& arch) {
  const Fields c(raw.config, "config.json");
  json out;
  out["model_type"] = c.string("model_type", arch.model_type);
  std::string dtype = c.string("dtype", "");
  if (dtype.empty()) dtype = c.string("torch_dtype", "");
  out["dtype"] = dtype;
  const int64_t hidden = c.integer("hidden_size", std::nullopt);
  const int64_t heads = c.integer("num_attention_heads", std::nullopt);
  if (heads <= 0) c.fail("num_attention_heads must be positive");
  const int64_t layers = c.integer("num_hidden_layers", std::nullopt);
  if (layers <= 0) c.fail("num_hidden_layers must be positive");
  const int64_t head_dim = c.integer("head_dim", 256);
  const int64_t max_pos = c.integer("max_position_embeddings", 131072);
  out["vocab_size"] = c.integer("vocab_size", std::nullopt);
  out["hidden_size"] = hidden;
  out["num_layers"] = layers;
  out["num_heads"] = heads;
  out["num_kv_heads"] = c.integer("num_key_value_heads", heads);
  out["head_dim"] = head_dim;
  out["intermediate_size"] = c.integer("intermediate_size", std::nullopt);
  out["max_position_embeddings"] = max_pos;
  out["norm_eps"] = c.number("rms_norm_eps", 1e-6);
  out["norm_weight_offset"] = true;  // Gemma3RMSNorm scales by (1 + w), in float32
  out["qk_norm"] = true;             // per-head q_norm / k_norm, (1 + w) too
  out["attention_bias"] = c.boolean("attention_bias", false);
  out["tie_word_embeddings"] = c.boolean("tie_word_embeddings", true);
  const std::string act = c.string(c.has("hidden_activation") ? "hidden_activation" : "hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    c.unsupported("hidden_activation '" + act + "' is not supported; Gemma 3's MLP is gelu_pytorch_tanh (GELU, tanh approximation)");
  out["activation"] = "gelu_tanh";
  if (c.boolean("use_bidirectional_attention", false))
    c.unsupported("use_bidirectional_attention (EmbeddingGemma's encoder attention) is not supported; this family serves causal LMs");
  // The attention scale query_pre_attn_scalar^-0.5 (transformers' default scalar 256).
  const double scalar = c.number("query_pre_attn_scalar", 256);
  if (!(scalar > 0)) c.fail("query_pre_attn_scalar must be positive");
  out["attention_scale"] = 1.0 / std::sqrt(scalar);
  // The embedding scale sqrt(hidden_size). transformers multiplies by it cast to the
  // embedding table's dtype: float32 in the float32 reference memra is checked against,
  // bf16-rounded when transformers runs the bf16 checkpoint as bf16 (62.0 for 3840 instead
  // of 61.97; exact for powers of four such as 256). memra follows the float32 value.
  out["embedding_scale"] = static_cast<double>(static_cast<float>(std::sqrt(static_cast<double>(hidden))));
  // Soft-caps: null / absent = none.
  out["attn_logit_softcapping"] = c.number("attn_logit_softcapping", 0);
  out["final_logit_softcapping"] = c.number("final_logit_softcapping", 0);
  if (out["attn_logit_softcapping"].get<double>() < 0 || out["final_logit_softcapping"].get<double>() < 0)
    c.fail("attn_logit_softcapping and final_logit_softcapping must be positive or null");

  // Layer kinds.
  json kinds = json::array();
  std::string from = "layer_types";
  if (const json* lt = c.find("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != layers)
      c.fail("'layer_types' must list one entry per layer (" + std::to_string(layers) + ")");
    for (const json& k : *lt)
      if (k != "sliding_attention" && k != "full_attention")
        c.unsupported("layer kind " + k.dump() + " is not sliding_attention or full_attention");
    kinds = *lt;
  } else {
    int64_t pattern = kDefaultPattern;
    if (c.has("sliding_window_pattern")) {
      pattern = c.integer("sliding_window_pattern", std::nullopt);
      from = "sliding_window_pattern " + std::to_string(pattern);
    } else if (c.has("_sliding_window_pattern")) {
      pattern = c.integer("_sliding_window_pattern", std::nullopt);
      from = "_sliding_window_pattern " + std::to_string(pattern);
    } else {
      from = "transformers' default sliding_window_pattern 6 (the config has neither layer_types nor sliding_window_pattern)";
    }
    if (pattern <= 0) c.fail("sliding_window_pattern must be positive");
    for (int64_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  }
  out["layer_types"] = kinds;
  out["layer_types_from"] = from;
  bool any_sliding = false;
  for (const auto& k : kinds) any_sliding |= k == "sliding_attention";
  out["sliding_window"] = any_sliding ? c.integer("sliding_window", 4096) : 0;
  if (any_sliding && out["sliding_window"].get<int64_t>() <= 0) c.fail("sliding_window must be positive when layers slide");

  // RoPE: the global layers' (rope_theta + rope_scaling, or rope_parameters.full_attention)
  // and the local layers' base (rope_local_base_freq, or rope_parameters.sliding_attention),
  // never scaled.
  json rope = family::hf_rope(c, kGlobalTheta, head_dim, max_pos);
  bool local_given = c.has("rope_local_base_freq");
  if (const json* rp = c.find("rope_parameters"); rp && rp->is_object() && rp->contains("sliding_attention")) {
    const json& s = (*rp)["sliding_attention"];
    local_given = s.is_object() && s.contains("rope_theta") && !s["rope_theta"].is_null();
  }
  if (!local_given) rope["local_theta"] = kLocalTheta;
  if (!(rope["local_theta"].get<double>() > 0)) c.fail("the sliding layers' rope theta must be positive");
  out["rope"] = rope;
  family::hf_special_tokens(raw, out);
  return out;
}

}  // namespace

std::string normalize_config(const char* raw_json) {
  const RawConfig raw = family::parse_raw_config(raw_json);
  const Arch* arch = nullptr;
  if (raw.format == "hf")
    for (const Arch& a : kArchitectures)
      if (raw.architecture == a.hf) arch = &a;
  if (!arch) {
    std::string served;
    for (const Arch& a : kArchitectures) served += (served.empty() ? "" : ", ") + std::string(a.hf);
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED,
                              raw.format == "hf" ? "architecture '" + raw.architecture + "' is not one this family serves; it serves " + served
                                                 : "GGUF architecture '" + raw.architecture +
                                                       "' is not read yet (family-gemma serves Hugging Face checkpoints: " + served + ")");
  }
  json out = from_hf(raw, *arch);
  out["memra_config_version"] = family::kNormalisedConfigVersion;
  out["architecture"] = arch->hf;
  out["family"] = "gemma";
  out["source_format"] = raw.format;
  return out.dump(1);
}

const char* const* handled_architectures() {
  static const std::vector<const char*> kHandles = [] {
    std::vector<const char*> h;
    for (const Arch& a : kArchitectures) h.push_back(a.hf);
    h.push_back(nullptr);
    return h;
  }();
  return kHandles.data();
}

}  // namespace memra::gemma
