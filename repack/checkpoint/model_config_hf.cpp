// ModelConfig from a Hugging Face config.json (+ generation_config.json).
// Handles both the transformers <= 4 keys (rope_theta, rope_scaling) and the
// transformers 5 form (rope_parameters, flat or per layer type).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "repack/checkpoint/model_config.hpp"

namespace memra {
namespace {
using nlohmann::json;

struct ArchRow {
  const char* architecture;
  const char* family;
};
constexpr ArchRow kArchs[] = {
    {"LlamaForCausalLM", "llama"},          {"Qwen2ForCausalLM", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3"},          {"Qwen3MoeForCausalLM", "qwen3_moe"},
    {"Qwen3NextForCausalLM", "qwen3_next"}, {"Gemma3ForCausalLM", "gemma3"},
    {"Gemma3ForConditionalGeneration", "gemma3"},
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

Error bad(const std::string& what) {
  return make_error(ErrorCode::invalid_argument, "config.json: " + what);
}

const json* field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// Typed getters: absent/null -> fallback; wrong type -> error.
Result<int64_t> get_int(const json& j, const char* key, std::optional<int64_t> fallback) {
  const json* v = field(j, key);
  if (!v) {
    if (fallback) return *fallback;
    return bad(std::string("'") + key + "' is missing");
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) return static_cast<int64_t>(v->get<double>());
  return bad(std::string("'") + key + "' is not an integer");
}

Result<double> get_num(const json& j, const char* key, double fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number()) return bad(std::string("'") + key + "' is not a number");
  return v->get<double>();
}

Result<bool> get_bool(const json& j, const char* key, bool fallback) {
  const json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) return bad(std::string("'") + key + "' is not a boolean");
  return v->get<bool>();
}

// A token id field may be an int, a list of ints, or null.
Result<std::vector<int64_t>> get_ids(const json& j, const char* key) {
  std::vector<int64_t> out;
  const json* v = field(j, key);
  if (!v) return out;
  if (v->is_number_integer()) {
    out.push_back(v->get<int64_t>());
    return out;
  }
  if (v->is_array()) {
    for (const auto& e : *v) {
      if (!e.is_number_integer()) return bad(std::string("'") + key + "' holds a non-integer");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  return bad(std::string("'") + key + "' is not a token id or a list of them");
}

// One rope parameter set (rope_scaling of old configs, or an entry of
// rope_parameters) applied onto `rope`. Sets theta when the set carries one.
Status apply_rope_params(const json& p, RopeConfig& rope, int64_t max_pos, const std::string& where) {
  if (!p.is_object()) return bad(where + " is not an object");
  if (const json* t = field(p, "rope_theta")) {
    if (!t->is_number()) return bad(where + ".rope_theta is not a number");
    rope.theta = t->get<double>();
  }
  std::string type = "default";
  if (const json* t = field(p, "rope_type")) type = t->is_string() ? t->get<std::string>() : "?";
  else if (const json* t2 = field(p, "type")) type = t2->is_string() ? t2->get<std::string>() : "?";
  auto num = [&](const char* k, double fb) { return get_num(p, k, fb); };
  if (type == "default") {
    rope.scaling = RopeScaling::none;
  } else if (type == "linear") {
    rope.scaling = RopeScaling::linear;
    auto f = num("factor", 0);
    if (!f) return f.error();
    rope.factor = *f;
  } else if (type == "llama3") {
    rope.scaling = RopeScaling::llama3;
    auto f = num("factor", 0), lo = num("low_freq_factor", 0), hi = num("high_freq_factor", 0);
    if (!f || !lo || !hi) return bad(where + " has a non-numeric llama3 parameter");
    auto orig = get_int(p, "original_max_position_embeddings", std::nullopt);
    if (!orig) return bad(where + " (llama3) lacks original_max_position_embeddings");
    rope.factor = *f, rope.low_freq_factor = *lo, rope.high_freq_factor = *hi, rope.original_max_position = *orig;
    if (!(rope.low_freq_factor > 0 && rope.high_freq_factor > rope.low_freq_factor))
      return bad(where + " (llama3) needs 0 < low_freq_factor < high_freq_factor");
  } else if (type == "yarn") {
    rope.scaling = RopeScaling::yarn;
    auto f = num("factor", 0), bf = num("beta_fast", 32), bs = num("beta_slow", 1), af = num("attention_factor", 0);
    if (!f || !bf || !bs || !af) return bad(where + " has a non-numeric yarn parameter");
    auto orig = get_int(p, "original_max_position_embeddings", max_pos);
    if (!orig) return orig.error();
    rope.factor = *f, rope.beta_fast = *bf, rope.beta_slow = *bs, rope.attention_factor = *af;
    rope.original_max_position = *orig;
  } else {
    return make_error(ErrorCode::unsupported, "config.json: " + where + " rope type '" + type +
                                                  "' is not supported; supported: default, linear, llama3, yarn");
  }
  if (rope.scaling != RopeScaling::none && !(rope.factor > 0)) return bad(where + " scaling factor must be positive");
  return {};
}

bool has_key(const json& j, const char* k) { return j.find(k) != j.end(); }

Status read_rope(const json& cfg, const std::string& family, int64_t max_pos, ModelConfig& c) {
  RopeConfig& rope = c.rope;
  rope.theta = family == "gemma3" ? 1e6 : 10000.0;  // the transformers class defaults
  auto prf = get_num(cfg, "partial_rotary_factor", family == "qwen3_next" ? 0.25 : 1.0);
  if (!prf) return prf.error();
  rope.partial_rotary_factor = *prf;

  if (const json* rp = field(cfg, "rope_parameters")) {
    if (!rp->is_object()) return bad("'rope_parameters' is not an object");
    if (has_key(*rp, "full_attention") || has_key(*rp, "sliding_attention") || has_key(*rp, "linear_attention")) {
      // Per layer type (transformers 5, e.g. Gemma 3).
      if (const json* full = field(*rp, "full_attention")) MEMRA_TRY(apply_rope_params(*full, rope, max_pos, "rope_parameters.full_attention"));
      if (const json* slide = field(*rp, "sliding_attention")) {
        RopeConfig local = rope;
        MEMRA_TRY(apply_rope_params(*slide, local, max_pos, "rope_parameters.sliding_attention"));
        if (local.scaling != RopeScaling::none)
          return make_error(ErrorCode::unsupported, "config.json: rope scaling on sliding-attention layers is not supported");
        rope.local_theta = local.theta;
      }
    } else {
      MEMRA_TRY(apply_rope_params(*rp, rope, max_pos, "rope_parameters"));
      auto p = get_num(*rp, "partial_rotary_factor", rope.partial_rotary_factor);
      if (!p) return p.error();
      rope.partial_rotary_factor = *p;
    }
  } else {
    auto theta = get_num(cfg, "rope_theta", rope.theta);
    if (!theta) return theta.error();
    rope.theta = *theta;
    if (const json* rs = field(cfg, "rope_scaling")) MEMRA_TRY(apply_rope_params(*rs, rope, max_pos, "rope_scaling"));
    if (const json* local = field(cfg, "rope_local_base_freq")) {
      if (!local->is_number()) return bad("'rope_local_base_freq' is not a number");
      rope.local_theta = local->get<double>();
    }
  }
  if (family == "gemma3" && rope.local_theta == 0) rope.local_theta = 10000.0;  // Gemma 3 default
  const double rd = static_cast<double>(c.head_dim) * rope.partial_rotary_factor;
  rope.rotary_dim = static_cast<int64_t>(std::llround(rd));
  if (std::fabs(rd - static_cast<double>(rope.rotary_dim)) > 1e-9)
    return bad("head_dim x partial_rotary_factor = " + std::to_string(rd) + " is not a whole number");
  return {};
}

Status read_layer_types(const json& cfg, const std::string& family, ModelConfig& c) {
  if (const json* lt = field(cfg, "layer_types")) {
    if (!lt->is_array()) return bad("'layer_types' is not an array");
    for (const auto& e : *lt) {
      LayerKind k;
      if (!e.is_string() || !parse_layer_kind(e.get<std::string>(), &k))
        return make_error(ErrorCode::unsupported, "config.json: layer type " + e.dump() +
                                                      " is not supported; supported: full_attention, sliding_attention, linear_attention");
      c.layer_types.push_back(k);
    }
    if (static_cast<int64_t>(c.layer_types.size()) != c.num_layers)
      return bad("'layer_types' has " + std::to_string(c.layer_types.size()) + " entries for " +
                 std::to_string(c.num_layers) + " layers");
    return {};
  }
  c.layer_types.assign(static_cast<size_t>(c.num_layers), LayerKind::full_attention);
  if (family == "gemma3") {
    int64_t pattern = 6;
    for (const char* k : {"sliding_window_pattern", "_sliding_window_pattern"}) {
      if (field(cfg, k)) {
        auto p = get_int(cfg, k, std::nullopt);
        if (!p) return p.error();
        pattern = *p;
        break;
      }
    }
    if (pattern <= 0) return bad("sliding_window_pattern must be positive");
    for (int64_t i = 0; i < c.num_layers; ++i)
      if ((i + 1) % pattern != 0) c.layer_types[static_cast<size_t>(i)] = LayerKind::sliding_attention;
  } else if (family == "qwen3_next") {
    auto interval = get_int(cfg, "full_attention_interval", 4);
    if (!interval) return interval.error();
    if (*interval <= 0) return bad("full_attention_interval must be positive");
    for (int64_t i = 0; i < c.num_layers; ++i)
      if ((i + 1) % *interval != 0) c.layer_types[static_cast<size_t>(i)] = LayerKind::linear_attention;
  } else if (family == "qwen2" || family == "qwen3" || family == "qwen3_moe") {
    auto use = get_bool(cfg, "use_sliding_window", false);
    if (!use) return use.error();
    if (*use && field(cfg, "sliding_window")) {
      auto from = get_int(cfg, "max_window_layers", c.num_layers);
      if (!from) return from.error();
      for (int64_t i = *from; i < c.num_layers; ++i) c.layer_types[static_cast<size_t>(i)] = LayerKind::sliding_attention;
    }
  }
  return {};
}

}  // namespace

Result<ModelConfig> model_config_from_hf_json(std::string_view config_text, std::string_view generation_text) {
  json top = json::parse(config_text.begin(), config_text.end(), nullptr, false);
  if (top.is_discarded() || !top.is_object()) return bad("not a JSON object");
  const json* archs = field(top, "architectures");
  if (!archs || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return bad("no 'architectures' list; memra needs it to pick the model family");
  ModelConfig c;
  c.source_format = "hf";
  c.architecture = (*archs)[0].get<std::string>();
  for (const auto& row : kArchs)
    if (c.architecture == row.architecture) c.family = row.family;
  if (c.family.empty())
    return make_error(ErrorCode::unsupported, "architecture '" + c.architecture + "' is not supported; supported: " +
                                                  join(supported_hf_architectures()));

  // Multimodal wrappers keep the language model's fields in text_config.
  json cfg = top;
  if (const json* tc = field(top, "text_config")) {
    if (!tc->is_object()) return bad("'text_config' is not an object");
    cfg = *tc;
    for (const auto& [k, v] : top.items())
      if (k != "text_config" && k != "vision_config" && !has_key(cfg, k.c_str())) cfg[k] = v;
  }
  const std::string& fam = c.family;
  if (const json* mt = field(cfg, "model_type"); mt && mt->is_string()) c.model_type = mt->get<std::string>();
  for (const char* k : {"dtype", "torch_dtype"})
    if (const json* d = field(cfg, k); d && d->is_string() && c.dtype.empty()) c.dtype = d->get<std::string>();

  auto gi = [&](const char* k, std::optional<int64_t> fb, int64_t& out) -> Status {
    auto v = get_int(cfg, k, fb);
    if (!v) return v.error();
    out = *v;
    return {};
  };
  MEMRA_TRY(gi("vocab_size", std::nullopt, c.vocab_size));
  MEMRA_TRY(gi("hidden_size", std::nullopt, c.hidden_size));
  MEMRA_TRY(gi("num_hidden_layers", std::nullopt, c.num_layers));
  MEMRA_TRY(gi("num_attention_heads", std::nullopt, c.num_heads));
  MEMRA_TRY(gi("num_key_value_heads", c.num_heads, c.num_kv_heads));
  if (c.num_heads <= 0) return bad("num_attention_heads must be positive");
  MEMRA_TRY(gi("head_dim", c.hidden_size / c.num_heads, c.head_dim));
  MEMRA_TRY(gi("intermediate_size", fam == "qwen3_next" || fam == "qwen3_moe" ? std::optional<int64_t>(0) : std::nullopt,
               c.intermediate_size));
  MEMRA_TRY(gi("max_position_embeddings", 0, c.max_position_embeddings));

  auto eps = get_num(cfg, "rms_norm_eps", 1e-6);
  if (!eps) return eps.error();
  c.norm_eps = *eps;
  c.norm_type = NormType::rms_norm;
  c.norm_weight_offset = fam == "gemma3" || fam == "qwen3_next";
  c.qk_norm = fam == "qwen3" || fam == "qwen3_moe" || fam == "qwen3_next" || fam == "gemma3";
  c.attention_output_gate = fam == "qwen3_next";

  auto ab = get_bool(cfg, "attention_bias", fam == "qwen2");
  if (!ab) return ab.error();
  c.attention_bias = fam == "qwen2" ? true : *ab;  // Qwen2 always biases q/k/v, never o
  c.attention_output_bias = fam == "qwen2" ? false : *ab;
  auto mb = get_bool(cfg, "mlp_bias", false);
  if (!mb) return mb.error();
  c.mlp_bias = *mb;
  auto tie = get_bool(cfg, "tie_word_embeddings", fam == "gemma3");
  if (!tie) return tie.error();
  c.tie_word_embeddings = *tie;

  std::string act = fam == "gemma3" ? "gelu_pytorch_tanh" : "silu";
  for (const char* k : {"hidden_activation", "hidden_act"}) {
    if (const json* a = field(cfg, k)) {
      if (!a->is_string()) return bad(std::string("'") + k + "' is not a string");
      act = a->get<std::string>();
      break;
    }
  }
  c.activation = act;

  if (fam == "qwen3_moe" || fam == "qwen3_next") {
    MEMRA_TRY(gi(has_key(cfg, "num_experts") ? "num_experts" : "num_local_experts", std::nullopt, c.num_experts));
    MEMRA_TRY(gi("num_experts_per_tok", std::nullopt, c.num_experts_per_tok));
    MEMRA_TRY(gi("moe_intermediate_size", std::nullopt, c.moe_intermediate_size));
    MEMRA_TRY(gi("shared_expert_intermediate_size", 0, c.shared_expert_intermediate_size));
    MEMRA_TRY(gi("decoder_sparse_step", 1, c.decoder_sparse_step));
    auto ntp = get_bool(cfg, "norm_topk_prob", fam == "qwen3_next");
    if (!ntp) return ntp.error();
    c.norm_topk_prob = *ntp;
    auto mol = get_ids(cfg, "mlp_only_layers");
    if (!mol) return mol.error();
    c.mlp_only_layers = *mol;
  }
  if (fam == "qwen3_next") {
    MEMRA_TRY(gi("linear_num_key_heads", std::nullopt, c.linear_num_key_heads));
    MEMRA_TRY(gi("linear_num_value_heads", std::nullopt, c.linear_num_value_heads));
    MEMRA_TRY(gi("linear_key_head_dim", std::nullopt, c.linear_key_head_dim));
    MEMRA_TRY(gi("linear_value_head_dim", std::nullopt, c.linear_value_head_dim));
    MEMRA_TRY(gi("linear_conv_kernel_dim", std::nullopt, c.linear_conv_kernel_dim));
  }
  if (fam == "gemma3") {
    auto q = get_num(cfg, "query_pre_attn_scalar", static_cast<double>(c.head_dim));
    auto a = get_num(cfg, "attn_logit_softcapping", 0), f = get_num(cfg, "final_logit_softcapping", 0);
    if (!q || !a || !f) return bad("gemma3 attention scalars are not numbers");
    c.query_pre_attn_scalar = *q, c.attn_logit_softcapping = *a, c.final_logit_softcapping = *f;
  }

  MEMRA_TRY(read_layer_types(cfg, fam, c));
  bool any_sliding = false;
  for (LayerKind k : c.layer_types) any_sliding |= k == LayerKind::sliding_attention;
  if (any_sliding) MEMRA_TRY(gi("sliding_window", std::nullopt, c.sliding_window));
  MEMRA_TRY(read_rope(cfg, fam, c.max_position_embeddings, c));

  // Special tokens: generation_config.json wins where it says something.
  auto eos = get_ids(cfg, "eos_token_id");
  auto bos = get_ids(cfg, "bos_token_id");
  auto pad = get_ids(cfg, "pad_token_id");
  if (!eos || !bos || !pad) return !eos ? eos.error() : !bos ? bos.error() : pad.error();
  if (!generation_text.empty()) {
    json gen = json::parse(generation_text.begin(), generation_text.end(), nullptr, false);
    if (gen.is_discarded() || !gen.is_object()) return bad("generation_config.json is not a JSON object");
    auto geos = get_ids(gen, "eos_token_id");
    auto gbos = get_ids(gen, "bos_token_id");
    if (!geos || !gbos) return make_error(ErrorCode::invalid_argument, "generation_config.json: bad token id field");
    if (!geos->empty()) eos = std::move(geos);
    if (!gbos->empty()) bos = std::move(gbos);
  }
  for (int64_t id : *eos)
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) c.eos_token_ids.push_back(id);
  if (!bos->empty()) c.bos_token_id = bos->front();
  if (!pad->empty()) c.pad_token_id = pad->front();

  MEMRA_TRY(validate(c));
  return c;
}

Result<ModelConfig> model_config_from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto slurp = [](const fs::path& p, std::string* out) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return false;
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
    return true;
  };
  std::string config, generation;
  if (!slurp(fs::path(dir) / "config.json", &config))
    return make_error(ErrorCode::not_found, "no config.json in '" + dir + "'; a Hugging Face checkpoint directory needs one");
  slurp(fs::path(dir) / "generation_config.json", &generation);  // optional
  auto c = model_config_from_hf_json(config, generation);
  if (!c) return make_error(c.error().code, "'" + dir + "': " + c.error().message);
  return c;
}

}  // namespace memra
