// ModelConfig <-> JSON (the form family plugins receive).
#include <nlohmann/json.hpp>

#include "repack/checkpoint/model_config.hpp"

namespace memra {
namespace {
using nlohmann::json;

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, "model config JSON: " + what);
}

// Readers that record the first error and leave the field unchanged.
struct Reader {
  const json& j;
  std::string error;

  const json* get(const char* key, bool required) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required && error.empty()) error = std::string("missing '") + key + "'";
      return nullptr;
    }
    return &*it;
  }
  void fail(const char* key, const char* want) {
    if (error.empty()) error = std::string("'") + key + "' is not " + want;
  }
  void str(const char* key, std::string& out, bool required = true) {
    if (const json* v = get(key, required)) v->is_string() ? void(out = v->get<std::string>()) : fail(key, "a string");
  }
  void i64(const char* key, int64_t& out, bool required = true) {
    if (const json* v = get(key, required)) v->is_number_integer() ? void(out = v->get<int64_t>()) : fail(key, "an integer");
  }
  void f64(const char* key, double& out, bool required = true) {
    if (const json* v = get(key, required)) v->is_number() ? void(out = v->get<double>()) : fail(key, "a number");
  }
  void boolean(const char* key, bool& out, bool required = true) {
    if (const json* v = get(key, required)) v->is_boolean() ? void(out = v->get<bool>()) : fail(key, "a boolean");
  }
  void opt_i64(const char* key, std::optional<int64_t>& out) {
    if (const json* v = get(key, false)) v->is_number_integer() ? void(out = v->get<int64_t>()) : fail(key, "an integer or null");
  }
  void i64_list(const char* key, std::vector<int64_t>& out, bool required = true) {
    const json* v = get(key, required);
    if (!v) return;
    if (!v->is_array()) return fail(key, "an array of integers");
    out.clear();
    for (const auto& e : *v) {
      if (!e.is_number_integer()) return fail(key, "an array of integers");
      out.push_back(e.get<int64_t>());
    }
  }
};

}  // namespace

std::string model_config_to_json(const ModelConfig& c) {
  json rope = {
      {"theta", c.rope.theta},
      {"local_theta", c.rope.local_theta},
      {"scaling", to_string(c.rope.scaling)},
      {"factor", c.rope.factor},
      {"low_freq_factor", c.rope.low_freq_factor},
      {"high_freq_factor", c.rope.high_freq_factor},
      {"original_max_position", c.rope.original_max_position},
      {"beta_fast", c.rope.beta_fast},
      {"beta_slow", c.rope.beta_slow},
      {"attention_factor", c.rope.attention_factor},
      {"freq_factors_tensor", c.rope.freq_factors_tensor},
      {"interleaved", c.rope.interleaved},
      {"partial_rotary_factor", c.rope.partial_rotary_factor},
      {"rotary_dim", c.rope.rotary_dim},
  };
  json j = {
      {"memra_config_version", ModelConfig::kJsonVersion},
      {"architecture", c.architecture},
      {"family", c.family},
      {"model_type", c.model_type},
      {"source_format", c.source_format},
      {"dtype", c.dtype},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rope", rope},
      {"norm_type", to_string(c.norm_type)},
      {"norm_eps", c.norm_eps},
      {"norm_weight_offset", c.norm_weight_offset},
      {"qk_norm", c.qk_norm},
      {"attention_bias", c.attention_bias},
      {"attention_output_bias", c.attention_output_bias},
      {"mlp_bias", c.mlp_bias},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"activation", c.activation},
      {"num_experts", c.num_experts},
      {"num_experts_per_tok", c.num_experts_per_tok},
      {"moe_intermediate_size", c.moe_intermediate_size},
      {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
      {"norm_topk_prob", c.norm_topk_prob},
      {"decoder_sparse_step", c.decoder_sparse_step},
      {"mlp_only_layers", c.mlp_only_layers},
      {"bos_token_id", c.bos_token_id ? json(*c.bos_token_id) : json(nullptr)},
      {"eos_token_ids", c.eos_token_ids},
      {"pad_token_id", c.pad_token_id ? json(*c.pad_token_id) : json(nullptr)},
  };
  // The family's own keys, as it wrote them.
  if (!c.family_json.empty()) {
    const json family = json::parse(c.family_json, nullptr, /*allow_exceptions=*/false);
    if (family.is_object())
      for (const auto& [key, value] : family.items())
        if (!j.contains(key)) j[key] = value;
  }
  return j.dump(1);
}

Result<ModelConfig> model_config_from_json(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  const auto ver = j.find("memra_config_version");
  if (ver == j.end() || !ver->is_number_integer() || ver->get<int64_t>() != ModelConfig::kJsonVersion)
    return bad("memra_config_version is not " + std::to_string(ModelConfig::kJsonVersion) +
               "; the config was written by an incompatible memra");
  ModelConfig c;
  Reader r{j, {}};
  r.str("architecture", c.architecture);
  r.str("family", c.family);
  r.str("model_type", c.model_type, false);
  r.str("source_format", c.source_format, false);
  r.str("dtype", c.dtype, false);
  r.i64("vocab_size", c.vocab_size);
  r.i64("hidden_size", c.hidden_size);
  r.i64("intermediate_size", c.intermediate_size);
  r.i64("num_layers", c.num_layers);
  r.i64("num_heads", c.num_heads);
  r.i64("num_kv_heads", c.num_kv_heads);
  r.i64("head_dim", c.head_dim);
  r.i64("max_position_embeddings", c.max_position_embeddings, false);
  std::string s;
  if (const json* rope = r.get("rope", true)) {
    if (!rope->is_object()) return bad("'rope' is not an object");
    Reader rr{*rope, {}};
    rr.f64("theta", c.rope.theta);
    rr.f64("local_theta", c.rope.local_theta, false);
    s = "none";
    rr.str("scaling", s, false);
    if (!parse_rope_scaling(s, &c.rope.scaling)) return bad("rope.scaling '" + s + "' is not none|linear|llama3|yarn");
    rr.f64("factor", c.rope.factor, false);
    rr.f64("low_freq_factor", c.rope.low_freq_factor, false);
    rr.f64("high_freq_factor", c.rope.high_freq_factor, false);
    rr.i64("original_max_position", c.rope.original_max_position, false);
    rr.f64("beta_fast", c.rope.beta_fast, false);
    rr.f64("beta_slow", c.rope.beta_slow, false);
    rr.f64("attention_factor", c.rope.attention_factor, false);
    rr.str("freq_factors_tensor", c.rope.freq_factors_tensor, false);
    rr.boolean("interleaved", c.rope.interleaved, false);
    rr.f64("partial_rotary_factor", c.rope.partial_rotary_factor, false);
    rr.i64("rotary_dim", c.rope.rotary_dim);
    if (!rr.error.empty()) return bad("rope: " + rr.error);
  }
  s = "rms_norm";
  r.str("norm_type", s, false);
  if (!parse_norm_type(s, &c.norm_type)) return bad("norm_type '" + s + "' is not rms_norm|layer_norm");
  r.f64("norm_eps", c.norm_eps);
  r.boolean("norm_weight_offset", c.norm_weight_offset, false);
  r.boolean("qk_norm", c.qk_norm, false);
  r.boolean("attention_bias", c.attention_bias, false);
  r.boolean("attention_output_bias", c.attention_output_bias, false);
  r.boolean("mlp_bias", c.mlp_bias, false);
  r.boolean("tie_word_embeddings", c.tie_word_embeddings, false);
  r.str("activation", c.activation, false);
  r.i64("num_experts", c.num_experts, false);
  r.i64("num_experts_per_tok", c.num_experts_per_tok, false);
  r.i64("moe_intermediate_size", c.moe_intermediate_size, false);
  r.i64("shared_expert_intermediate_size", c.shared_expert_intermediate_size, false);
  r.boolean("norm_topk_prob", c.norm_topk_prob, false);
  r.i64("decoder_sparse_step", c.decoder_sparse_step, false);
  r.i64_list("mlp_only_layers", c.mlp_only_layers, false);
  r.opt_i64("bos_token_id", c.bos_token_id);
  r.i64_list("eos_token_ids", c.eos_token_ids);
  r.opt_i64("pad_token_id", c.pad_token_id);
  if (!r.error.empty()) return bad(r.error);
  MEMRA_TRY(validate(c));
  c.family_json = std::string(text);
  return c;
}

}  // namespace memra
