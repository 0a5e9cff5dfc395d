// config_normalize for the llama family: Hugging Face config.json or GGUF metadata
// -> the normalised config (docs/FORMAT.md), with each architecture's defaults.
#include "llama_config.hpp"

#include <vector>

#include "family_plugin_support.hpp"
#include "raw_config.hpp"

namespace memra::llama {
namespace {

using family::Fields;
using family::json;
using family::RawConfig;

// The architectures this family serves: HF class, GGUF general.architecture, HF
// model_type, and what the class does beyond the plain Llama block.
struct Variant {
  const char* hf;
  const char* gguf;  // "" = none (Mistral GGUFs say "llama")
  const char* model_type;
  bool qkv_bias_always;    // Qwen2: q/k/v always biased, o never
  bool qk_norm;            // Qwen3: RMSNorm on q and k per head
  bool window_from_flags;  // Qwen2/3: use_sliding_window + max_window_layers
  bool window_all_layers;  // Mistral: a non-null sliding_window applies to every layer
  bool experts;            // Qwen3-MoE: sparse MLPs (softmax top-k routing)
};

constexpr Variant kVariants[] = {
    {"LlamaForCausalLM", "llama", "llama", false, false, false, false, false},
    {"MistralForCausalLM", "", "mistral", false, false, false, true, false},
    {"Qwen2ForCausalLM", "qwen2", "qwen2", true, false, true, false, false},
    {"Qwen3ForCausalLM", "qwen3", "qwen3", false, true, true, false, false},
    // GGUF "qwen3moe": experts stacked (ffn_{gate,up,down}_exps), read in place.
    {"Qwen3MoeForCausalLM", "qwen3moe", "qwen3_moe", false, true, true, false, true},
};

const Variant* variant_of(const RawConfig& raw) {
  for (const Variant& v : kVariants)
    if (raw.format == "hf" ? raw.architecture == v.hf : raw.architecture == v.gguf && v.gguf[0] != '\0') return &v;
  return nullptr;
}

std::string handled_list(bool gguf) {
  std::string s;
  for (const Variant& v : kVariants) {
    const char* name = gguf ? v.gguf : v.hf;
    if (name[0] != '\0') s += (s.empty() ? "" : ", ") + std::string(name);
  }
  return s;
}

json layers_of(int64_t n, const char* kind) {
  json l = json::array();
  for (int64_t i = 0; i < n; ++i) l.push_back(kind);
  return l;
}

json from_hf(const RawConfig& raw, const Variant& v) {
  const Fields c(raw.config, "config.json");
  json out;
  out["model_type"] = c.string("model_type", v.model_type);
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
  out["intermediate_size"] = c.integer("intermediate_size", std::nullopt);
  out["max_position_embeddings"] = max_pos;
  out["norm_type"] = "rms_norm";
  out["norm_eps"] = c.number("rms_norm_eps", 1e-6);
  out["norm_weight_offset"] = false;
  out["qk_norm"] = v.qk_norm;
  const bool bias = c.boolean("attention_bias", v.qkv_bias_always);
  out["attention_bias"] = v.qkv_bias_always ? true : bias;
  out["attention_output_bias"] = v.qkv_bias_always ? false : bias;
  out["mlp_bias"] = c.boolean("mlp_bias", false);
  out["tie_word_embeddings"] = c.boolean("tie_word_embeddings", false);
  out["activation"] = c.string(c.has("hidden_activation") ? "hidden_activation" : "hidden_act", "silu");

  json kinds = layers_of(layers, "full_attention");
  if (const json* lt = c.find("layer_types")) {
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != layers)
      c.fail("'layer_types' must list one entry per layer (" + std::to_string(layers) + ")");
    kinds = *lt;
  } else if (v.window_from_flags && c.boolean("use_sliding_window", false) && c.has("sliding_window")) {
    for (int64_t i = c.integer("max_window_layers", layers); i < layers; ++i) kinds[static_cast<size_t>(i)] = "sliding_attention";
  } else if (v.window_all_layers && c.has("sliding_window")) {
    kinds = layers_of(layers, "sliding_attention");
  }
  out["layer_types"] = kinds;
  bool any_sliding = false;
  for (const auto& k : kinds) any_sliding |= k == "sliding_attention";
  out["sliding_window"] = any_sliding ? c.integer("sliding_window", std::nullopt) : 0;
  out["rope"] = family::hf_rope(c, 10000.0, head_dim, max_pos);
  if (v.experts) {
    // transformers 5 says num_local_experts; the Hub's Qwen3-MoE configs say num_experts.
    out["num_experts"] = c.integer(c.has("num_local_experts") ? "num_local_experts" : "num_experts", std::nullopt);
    out["num_experts_per_tok"] = c.integer("num_experts_per_tok", std::nullopt);
    out["moe_intermediate_size"] = c.integer("moe_intermediate_size", std::nullopt);
    out["norm_topk_prob"] = c.boolean("norm_topk_prob", false);
    out["decoder_sparse_step"] = c.integer("decoder_sparse_step", 1);
    json dense = json::array();
    if (const json* m = c.find("mlp_only_layers")) {
      if (!m->is_array()) c.fail("'mlp_only_layers' must be a list of layer indices");
      dense = *m;
    }
    out["mlp_only_layers"] = dense;
  }
  family::hf_special_tokens(raw, out);
  return out;
}

json from_gguf(const RawConfig& raw, const Variant& v) {
  const std::string arch = raw.architecture;
  const Fields k(raw.metadata, "GGUF config", arch + ".");
  json out;
  out["model_type"] = arch;
  out["dtype"] = "";
  const int64_t layers = k.integer("block_count", std::nullopt);
  const int64_t hidden = k.integer("embedding_length", std::nullopt);
  const int64_t heads = k.integer("attention.head_count", std::nullopt);
  if (heads <= 0) k.fail("attention.head_count must be positive");
  const int64_t head_dim = k.integer("attention.key_length", hidden / heads);
  if (k.integer("attention.value_length", head_dim) != head_dim)
    k.unsupported("value_length differs from key_length; not supported");
  const int64_t max_pos = k.integer("context_length", 0);
  out["num_layers"] = layers;
  out["hidden_size"] = hidden;
  out["num_heads"] = heads;
  out["num_kv_heads"] = k.integer("attention.head_count_kv", heads);
  out["head_dim"] = head_dim;
  out["intermediate_size"] = k.integer("feed_forward_length", v.experts ? std::optional<int64_t>(0) : std::nullopt);
  out["max_position_embeddings"] = max_pos;
  if (v.experts) {
    // llama.cpp's converter: every layer sparse, the experts stacked. llama.cpp renormalises
    // the top-k weights of a qwen3moe file always (its graph passes norm_w = true), whatever
    // the checkpoint's norm_topk_prob was; expert_weights_norm, the key its other MoE
    // architectures read, overrides that when a file carries it.
    out["num_experts"] = k.integer("expert_count", std::nullopt);
    out["num_experts_per_tok"] = k.integer("expert_used_count", std::nullopt);
    out["moe_intermediate_size"] = k.integer("expert_feed_forward_length", std::nullopt);
    out["norm_topk_prob"] = k.boolean("expert_weights_norm", true);
    out["norm_topk_prob_from"] = k.has("expert_weights_norm") ? "expert_weights_norm" : "llama.cpp's qwen3moe default (always renormalised)";
    out["decoder_sparse_step"] = 1;
    out["mlp_only_layers"] = json::array();
  }

  // Vocabulary: the explicit key, else the tokenizer's size, else the embedding rows.
  int64_t vocab = 0;
  if (k.has("vocab_size")) {
    vocab = k.integer("vocab_size", std::nullopt);
  } else if (const json* toks = raw.metadata.contains("tokenizer.ggml.tokens") ? &raw.metadata["tokenizer.ggml.tokens"] : nullptr) {
    // Long arrays come as {"length": N} (docs/PLUGINS.md, "Raw configs").
    vocab = toks->is_array() ? static_cast<int64_t>(toks->size()) : toks->value("length", int64_t{0});
  } else if (const auto shape = raw.tensor_shape("token_embd.weight"); shape.size() == 2) {
    vocab = shape[0];
  }
  out["vocab_size"] = vocab;

  const double eps = k.number("attention.layer_norm_rms_epsilon", 0);
  if (!(eps > 0)) k.fail("'" + k.name("attention.layer_norm_rms_epsilon") + "' is missing or not positive");
  out["norm_type"] = "rms_norm";
  out["norm_eps"] = eps;
  out["norm_weight_offset"] = false;
  out["activation"] = "silu";
  // Facts GGUF records only as tensors.
  out["qk_norm"] = raw.has_tensor("blk.0.attn_q_norm.weight");
  out["attention_bias"] = raw.has_tensor("blk.0.attn_q.bias");
  out["attention_output_bias"] = raw.has_tensor("blk.0.attn_output.bias");
  out["mlp_bias"] = raw.has_tensor("blk.0.ffn_up.bias") || raw.has_tensor("blk.0.ffn_down.bias");
  out["tie_word_embeddings"] = !raw.has_tensor("output.weight");
  out["layer_types"] = layers_of(layers, "full_attention");
  out["sliding_window"] = 0;
  // llama.cpp's converter permutes llama q/k rows for interleaved-pair RoPE; the
  // other architectures keep the half-split pairing.
  out["rope"] = family::gguf_rope(k, raw, 10000.0, head_dim, max_pos, std::string(v.gguf) == "llama");
  family::gguf_special_tokens(raw, out);
  return out;
}

}  // namespace

std::string normalize_config(const char* raw_json) {
  const RawConfig raw = family::parse_raw_config(raw_json);
  const Variant* v = variant_of(raw);
  if (!v)
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED, (raw.format == "hf" ? "architecture '" : "GGUF architecture '") +
                                                         raw.architecture + "' is not one this family serves; it serves " +
                                                         handled_list(raw.format == "gguf"));
  json out = raw.format == "hf" ? from_hf(raw, *v) : from_gguf(raw, *v);
  out["memra_config_version"] = family::kNormalisedConfigVersion;
  out["architecture"] = v->hf;
  out["family"] = "llama";
  out["source_format"] = raw.format;
  return out.dump(1);
}

// From the variant table, so an architecture is one row: the HF classes, then the GGUF names.
const char* const* handled_architectures() {
  static const std::vector<const char*> kHandles = [] {
    std::vector<const char*> h;
    for (const Variant& v : kVariants) h.push_back(v.hf);
    for (const Variant& v : kVariants)
      if (v.gguf[0] != '\0') h.push_back(v.gguf);
    h.push_back(nullptr);
    return h;
  }();
  return kHandles.data();
}

}  // namespace memra::llama
