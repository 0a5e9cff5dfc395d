// config_normalize for the gemma family: a Hugging Face config.json (Gemma3TextConfig,
// transformers 4 or 5) or llama.cpp's GGUF metadata (arch "gemma3", from_gguf below) -> the
// normalised config (docs/FORMAT.md): the keys every family
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
  const char* gguf;  // llama.cpp's general.architecture
};
constexpr Arch kArchitectures[] = {
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3"},
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

// llama.cpp's conversion (conversion/gemma.py Gemma3Model, src/models/gemma3.cpp), read as
// llama.cpp reads it: the converter folds the + 1 of every norm into its weight (stored f32),
// trims the embedding to the tokenizer's rows, and writes neither query_pre_attn_scalar nor,
// in general, the sliding pattern or the sliding layers' RoPE base. As llama.cpp: a layer slides
// when "<arch>.attention.sliding_window" is set, by "<arch>.attention.sliding_window_pattern"
// (a period, or one bool per layer) or else llama.cpp's default period 6 — said in
// layer_types_from, since a file made from a checkpoint with another pattern (the
// gemma3_text fixture's is 2) is then read with llama.cpp's wrong one; the sliding layers'
// base from "<arch>.rope.freq_base_swa", else 10000; the attention scale 1/sqrt(head_dim),
// except for the 62-layer 27B, whose query_pre_attn_scalar is hidden/heads.
json from_gguf(const RawConfig& raw) {
  const Fields k(raw.metadata, "GGUF config", raw.architecture + ".");
  json out;
  out["model_type"] = raw.architecture;
  out["dtype"] = "";
  const int64_t layers = k.integer("block_count", std::nullopt);
  if (layers <= 0) k.fail("block_count must be positive");
  const int64_t hidden = k.integer("embedding_length", std::nullopt);
  const int64_t heads = k.integer("attention.head_count", std::nullopt);
  if (heads <= 0) k.fail("attention.head_count must be positive");
  const int64_t head_dim = k.integer("attention.key_length", 256);
  if (k.integer("attention.value_length", head_dim) != head_dim) k.unsupported("value_length differs from key_length; not supported");
  const int64_t max_pos = k.integer("context_length", 131072);
  int64_t vocab = 0;
  if (const auto shape = raw.tensor_shape("token_embd.weight"); shape.size() == 2) vocab = shape[0];
  if (vocab <= 0) k.fail("the file has no 2-D token_embd.weight to take the vocabulary size from");
  out["vocab_size"] = vocab;
  out["hidden_size"] = hidden;
  out["num_layers"] = layers;
  out["num_heads"] = heads;
  out["num_kv_heads"] = k.integer("attention.head_count_kv", heads);
  out["head_dim"] = head_dim;
  out["intermediate_size"] = k.integer("feed_forward_length", std::nullopt);
  out["max_position_embeddings"] = max_pos;
  const double eps = k.number("attention.layer_norm_rms_epsilon", 0);
  if (!(eps > 0)) k.fail("'" + k.name("attention.layer_norm_rms_epsilon") + "' is missing or not positive");
  out["norm_eps"] = eps;
  out["norm_weight_offset"] = false;  // the converter folded the + 1 into the weights
  out["qk_norm"] = true;
  out["attention_bias"] = raw.has_tensor("blk.0.attn_q.bias");
  out["tie_word_embeddings"] = !raw.has_tensor("output.weight");
  out["activation"] = "gelu_tanh";
  const double scalar = layers == 62 ? static_cast<double>(hidden) / static_cast<double>(heads) : static_cast<double>(head_dim);
  out["attention_scale"] = 1.0 / std::sqrt(scalar);
  out["embedding_scale"] = static_cast<double>(static_cast<float>(std::sqrt(static_cast<double>(hidden))));
  out["attn_logit_softcapping"] = 0.0;  // Gemma 3 has none (the converter asserts it)
  out["final_logit_softcapping"] = k.number("final_logit_softcapping", 0);
  json kinds = json::array();
  std::string from = "no sliding window in the file: every layer global";
  const int64_t window = k.integer("attention.sliding_window", 0);
  if (window > 0) {
    const json* pattern = k.find("attention.sliding_window_pattern");
    if (pattern && pattern->is_array()) {
      if (static_cast<int64_t>(pattern->size()) < layers) k.fail("attention.sliding_window_pattern must give every layer");
      for (int64_t i = 0; i < layers; ++i) {
        const json& v = (*pattern)[static_cast<size_t>(i)];
        if (!v.is_boolean()) k.fail("attention.sliding_window_pattern must be a period or one bool per layer");
        kinds.push_back(v.get<bool>() ? "sliding_attention" : "full_attention");
      }
      from = "attention.sliding_window_pattern (per layer)";
    } else {
      int64_t period = kDefaultPattern;
      if (pattern) {
        period = k.integer("attention.sliding_window_pattern", std::nullopt);
        from = "attention.sliding_window_pattern " + std::to_string(period);
      } else {
        from = "llama.cpp's default sliding_window_pattern 6 (the GGUF has no attention.sliding_window_pattern)";
      }
      if (period <= 0) k.fail("attention.sliding_window_pattern must be positive");
      for (int64_t i = 0; i < layers; ++i) kinds.push_back(i % period < period - 1 ? "sliding_attention" : "full_attention");
    }
  } else {
    for (int64_t i = 0; i < layers; ++i) kinds.push_back("full_attention");
  }
  out["layer_types"] = kinds;
  out["layer_types_from"] = from;
  out["sliding_window"] = window > 0 ? window : 0;
  json rope = family::gguf_rope(k, raw, kGlobalTheta, head_dim, max_pos, false);
  rope["local_theta"] = k.number("rope.freq_base_swa", kLocalTheta);
  if (!(rope["local_theta"].get<double>() > 0)) k.fail("rope.freq_base_swa must be positive");
  out["rope"] = rope;
  family::gguf_special_tokens(raw, out);
  return out;
}

}  // namespace

std::string normalize_config(const char* raw_json) {
  const RawConfig raw = family::parse_raw_config(raw_json);
  const Arch* arch = nullptr;
  for (const Arch& a : kArchitectures)
    if (raw.architecture == (raw.format == "hf" ? a.hf : a.gguf)) arch = &a;
  if (!arch) {
    std::string served;
    for (const Arch& a : kArchitectures) served += (served.empty() ? "" : ", ") + std::string(raw.format == "hf" ? a.hf : a.gguf);
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED, (raw.format == "hf" ? "architecture '" : "GGUF architecture '") + raw.architecture +
                                                         "' is not one this family serves; it serves " + served);
  }
  json out = raw.format == "hf" ? from_hf(raw, *arch) : from_gguf(raw);
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
    for (const Arch& a : kArchitectures) h.push_back(a.gguf);
    h.push_back(nullptr);
    return h;
  }();
  return kHandles.data();
}

}  // namespace memra::gemma
