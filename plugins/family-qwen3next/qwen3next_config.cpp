// config_normalize for the qwen3next family: a Hugging Face config.json -> the
// normalised config (docs/FORMAT.md): the keys every family shares plus this family's
// own (layer kinds, Gated DeltaNet sizes and how the checkpoint lays them out, the gated
// attention, experts). Hugging Face checkpoints and llama.cpp's GGUF conversions (arch
// "qwen35" / "qwen3next": folded (1 + w) norms, A = -exp(A_log), split projections,
// Qwen3.5's value heads in tiled order).
#include "qwen3next_config.hpp"

#include <vector>

#include "family_plugin_support.hpp"
#include "raw_config.hpp"

namespace memra::qwen3next {
namespace {

using family::Fields;
using family::json;
using family::RawConfig;

// HF class -> whether its DeltaNet projections are Qwen3.5's separate ones, and the GGUF
// architecture llama.cpp's converter writes for it.
struct Arch {
  const char* hf;
  bool split_projections;
  const char* gguf;
};
constexpr Arch kArchitectures[] = {
    {"Qwen3NextForCausalLM", false, "qwen3next"},
    {"Qwen3_5ForCausalLM", true, "qwen35"},
    {"Qwen3_5MoeForCausalLM", true, "qwen35moe"},
    {"Qwen3_5ForConditionalGeneration", true, nullptr},  // the text part: the vision tower is not read yet
    {"Qwen3_5MoeForConditionalGeneration", true, nullptr},
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
  // The MTP head (mtp.*, under "model." in some conversions): its layer count from the
  // config (Qwen3.5) or from the tensors (Qwen3-Next's config has no key for it). A config
  // that declares a head whose weights the file lacks loads without it, saying why.
  int64_t mtp_layers = 0;
  for (const std::string top : {"mtp.", "model.mtp."})
    if (raw.has_tensor(top + "fc.weight"))
      while (raw.has_tensor(top + "layers." + std::to_string(mtp_layers) + ".input_layernorm.weight")) ++mtp_layers;
  // A config without a tensor listing (memra-bench's random shapes) gets what it declares.
  const bool listed = raw.tensors.is_object() && !raw.tensors.empty();
  if (const int64_t declared = c.integer("mtp_num_hidden_layers", 0); declared > 0 && mtp_layers == 0) {
    if (listed) out["mtp_missing"] = "the config declares " + std::to_string(declared) + " MTP layer(s) but the checkpoint has no mtp.* weights";
    else mtp_layers = declared;
  }
  out["mtp_layers"] = mtp_layers;
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
  out["linear_value_head_order"] = "grouped";
  out["linear_decay"] = "a_log";
  out["norm_weight_offset"] = true;
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

// llama.cpp's conversion (conversion/qwen.py, src/models/qwen35.cpp): "<arch>.block_count"
// counts the MTP layers appended after the decoder ("nextn_predict_layers"); the DeltaNet
// sizes are the ssm.* keys (state_size = key head dim, group_count = key heads,
// time_step_rank = value heads, inner_size = value width); layer kinds from
// attention.recurrent_layers or full_attention_interval.
json from_gguf(const RawConfig& raw, const Arch& arch) {
  const Fields k(raw.metadata, "GGUF config", raw.architecture + ".");
  json out;
  out["model_type"] = raw.architecture;
  out["dtype"] = "";
  const int64_t mtp_layers = k.integer("nextn_predict_layers", 0);
  const int64_t layers = k.integer("block_count", std::nullopt) - mtp_layers;
  if (layers <= 0) k.fail("block_count must exceed nextn_predict_layers");
  const int64_t hidden = k.integer("embedding_length", std::nullopt);
  const int64_t heads = k.integer("attention.head_count", std::nullopt);
  if (heads <= 0) k.fail("attention.head_count must be positive");
  const int64_t head_dim = k.integer("attention.key_length", hidden / heads);
  if (k.integer("attention.value_length", head_dim) != head_dim) k.unsupported("value_length differs from key_length; not supported");
  const int64_t max_pos = k.integer("context_length", 0);
  int64_t vocab = 0;
  if (const auto shape = raw.tensor_shape("token_embd.weight"); shape.size() == 2) vocab = shape[0];
  if (vocab <= 0) k.fail("the file has no 2-D token_embd.weight to take the vocabulary size from");
  out["vocab_size"] = vocab;
  out["hidden_size"] = hidden;
  out["num_layers"] = layers;
  out["mtp_layers"] = mtp_layers;
  out["num_heads"] = heads;
  out["num_kv_heads"] = k.integer("attention.head_count_kv", heads);
  out["head_dim"] = head_dim;
  out["intermediate_size"] = k.integer("feed_forward_length", 0);
  out["max_position_embeddings"] = max_pos;
  const double eps = k.number("attention.layer_norm_rms_epsilon", 0);
  if (!(eps > 0)) k.fail("'" + k.name("attention.layer_norm_rms_epsilon") + "' is missing or not positive");
  out["norm_eps"] = eps;
  out["activation"] = "silu";
  out["tie_word_embeddings"] = !raw.has_tensor("output.weight");
  json kinds = json::array();
  if (const json* rl = k.find("attention.recurrent_layers"); rl && rl->is_array()) {
    if (static_cast<int64_t>(rl->size()) < layers) k.fail("attention.recurrent_layers must list every layer");
    for (int64_t i = 0; i < layers; ++i) kinds.push_back((*rl)[static_cast<size_t>(i)].get<bool>() ? "linear_attention" : "full_attention");
  } else {
    const int64_t interval = k.integer("full_attention_interval", 4);
    if (interval <= 0) k.fail("'" + k.name("full_attention_interval") + "' must be positive");
    for (int64_t i = 0; i < layers; ++i) kinds.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
  }
  out["layer_types"] = kinds;
  bool bias = false;  // a fact GGUF records only as tensors: the first full-attention layer's
  for (size_t i = 0; i < kinds.size() && !bias; ++i)
    if (kinds[i] == "full_attention") {
      bias = raw.has_tensor("blk." + std::to_string(i) + ".attn_q.bias");
      break;
    }
  out["attention_bias"] = bias;
  const int64_t hk = k.integer("ssm.group_count", std::nullopt), hv = k.integer("ssm.time_step_rank", std::nullopt);
  const int64_t inner = k.integer("ssm.inner_size", std::nullopt);
  if (hk <= 0 || hv <= 0 || inner % hv != 0) k.fail("ssm.group_count, ssm.time_step_rank and ssm.inner_size disagree");
  out["linear_num_key_heads"] = hk;
  out["linear_num_value_heads"] = hv;
  out["linear_key_head_dim"] = k.integer("ssm.state_size", std::nullopt);
  out["linear_value_head_dim"] = inner / hv;
  out["linear_conv_kernel_dim"] = k.integer("ssm.conv_kernel", std::nullopt);
  // Qwen3-Next's in_proj_qkvz is written as attn_qkv + attn_gate with ssm_ba kept whole;
  // Qwen3.5's value heads are reordered so that value head h reads key head h % Hk.
  out["linear_projections"] = arch.split_projections ? "split" : "split_qkvz";
  out["linear_value_head_order"] = arch.split_projections && hk != hv ? "tiled" : "grouped";
  out["linear_decay"] = "a";
  out["norm_weight_offset"] = false;  // the converter folded the + 1 into the weights
  out["rope"] = family::gguf_rope(k, raw, 10000.0, head_dim, max_pos, false);
  // Experts (llama.cpp's converter: stacked ffn_{gate,up,down}_exps, the shared expert's gate
  // a [hidden] vector); llama.cpp renormalises the top-k weights of these architectures always
  // (norm_w = true in its graphs), unless a file says otherwise in expert_weights_norm.
  const int64_t experts = k.integer("expert_count", 0);
  out["num_experts"] = experts;
  out["num_experts_per_tok"] = experts > 0 ? k.integer("expert_used_count", std::nullopt) : 0;
  out["moe_intermediate_size"] = experts > 0 ? k.integer("expert_feed_forward_length", std::nullopt) : 0;
  out["shared_expert_intermediate_size"] = experts > 0 ? k.integer("expert_shared_feed_forward_length", 0) : 0;
  out["norm_topk_prob"] = k.boolean("expert_weights_norm", true);
  out["decoder_sparse_step"] = 1;
  out["mlp_only_layers"] = json::array();
  family::gguf_special_tokens(raw, out);
  return out;
}

}  // namespace

std::string normalize_config(const char* raw_json) {
  const RawConfig raw = family::parse_raw_config(raw_json);
  const Arch* arch = nullptr;
  for (const Arch& a : kArchitectures)
    if (raw.format == "hf" ? raw.architecture == a.hf : a.gguf && raw.architecture == a.gguf) arch = &a;
  if (!arch) {
    std::string served;
    for (const Arch& a : kArchitectures)
      if (raw.format == "hf" || a.gguf) served += (served.empty() ? "" : ", ") + std::string(raw.format == "hf" ? a.hf : a.gguf);
    throw family::PluginError(MEMRA_ERR_UNSUPPORTED, (raw.format == "hf" ? "architecture '" : "GGUF architecture '") +
                                                         raw.architecture + "' is not one this family serves; it serves " + served);
  }
  json out = raw.format == "hf" ? from_hf(raw, *arch) : from_gguf(raw, *arch);
  out["memra_config_version"] = family::kNormalisedConfigVersion;
  out["architecture"] = arch->hf;
  out["family"] = "qwen3next";
  out["source_format"] = raw.format;
  return out.dump(1);
}

// From the table: the HF classes, then the GGUF names.
const char* const* handled_architectures() {
  static const std::vector<const char*> kHandles = [] {
    std::vector<const char*> h;
    for (const Arch& a : kArchitectures) h.push_back(a.hf);
    for (const Arch& a : kArchitectures)
      if (a.gguf) h.push_back(a.gguf);
    h.push_back(nullptr);
    return h;
  }();
  return kHandles.data();
}

}  // namespace memra::qwen3next
