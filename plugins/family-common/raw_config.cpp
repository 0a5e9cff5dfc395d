#include "raw_config.hpp"

#include <algorithm>
#include <cmath>

#include "family_plugin_support.hpp"

namespace memra::family {
namespace {

PluginError invalid(const std::string& what) { return PluginError(MEMRA_ERR_INVALID_ARGUMENT, what); }

const json* member(const json& j, const std::string& key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

// One rope parameter set (rope_scaling of old configs, or an entry of rope_parameters)
// applied onto `rope`, which already holds the defaults. Sets theta when it carries one.
void apply_rope_params(const json& p, json& rope, int64_t max_pos, const Fields& cfg, const std::string& where) {
  if (!p.is_object()) cfg.fail(where + " is not an object");
  const Fields f(p, cfg.where(), "", cfg.name(where) + ".");
  if (f.has("rope_theta")) rope["theta"] = f.number("rope_theta", 0);
  std::string type = "default";
  if (const json* t = f.find("rope_type")) type = t->is_string() ? t->get<std::string>() : "?";
  else if (const json* t2 = f.find("type")) type = t2->is_string() ? t2->get<std::string>() : "?";
  if (type == "default") {
    rope["scaling"] = "none";
  } else if (type == "linear") {
    rope["scaling"] = "linear";
    rope["factor"] = f.number("factor", 0);
  } else if (type == "llama3") {
    rope["scaling"] = "llama3";
    rope["factor"] = f.number("factor", 0);
    const double lo = f.number("low_freq_factor", 0), hi = f.number("high_freq_factor", 0);
    rope["low_freq_factor"] = lo;
    rope["high_freq_factor"] = hi;
    rope["original_max_position"] = f.integer("original_max_position_embeddings", std::nullopt);
    if (!(lo > 0 && hi > lo)) cfg.fail(where + " (llama3) needs 0 < low_freq_factor < high_freq_factor");
  } else if (type == "yarn") {
    rope["scaling"] = "yarn";
    rope["factor"] = f.number("factor", 0);
    rope["beta_fast"] = f.number("beta_fast", 32);
    rope["beta_slow"] = f.number("beta_slow", 1);
    rope["attention_factor"] = f.number("attention_factor", 0);
    rope["original_max_position"] = f.integer("original_max_position_embeddings", max_pos);
  } else {
    cfg.unsupported(where + " rope type '" + type + "' is not supported; supported: default, linear, llama3, yarn");
  }
  if (rope["scaling"] != "none" && !(rope["factor"].get<double>() > 0)) cfg.fail(where + " scaling factor must be positive");
}

json rope_defaults(double theta) {
  return {{"theta", theta},      {"local_theta", 0.0},        {"scaling", "none"},     {"factor", 1.0},
          {"low_freq_factor", 0.0}, {"high_freq_factor", 0.0}, {"original_max_position", 0},
          {"beta_fast", 0.0},    {"beta_slow", 0.0},          {"attention_factor", 0.0}, {"freq_factors_tensor", ""},
          {"interleaved", false}, {"partial_rotary_factor", 1.0}, {"rotary_dim", 0}};
}

void set_rotary_dim(json& rope, int64_t head_dim, const Fields& where) {
  const double rd = static_cast<double>(head_dim) * rope["partial_rotary_factor"].get<double>();
  const auto dim = static_cast<int64_t>(std::llround(rd));
  if (std::fabs(rd - static_cast<double>(dim)) > 1e-9)
    where.fail("head_dim x partial_rotary_factor = " + std::to_string(rd) + " is not a whole number");
  rope["rotary_dim"] = dim;
}

void push_unique(json& list, int64_t id) {
  for (const auto& e : list)
    if (e.get<int64_t>() == id) return;
  list.push_back(id);
}

}  // namespace

std::vector<int64_t> RawConfig::tensor_shape(const std::string& name) const {
  std::vector<int64_t> out;
  if (!has_tensor(name)) return out;
  const json& t = tensors.at(name);
  if (t.is_object() && t.contains("shape") && t["shape"].is_array())
    for (const auto& d : t["shape"])
      if (d.is_number_integer()) out.push_back(d.get<int64_t>());
  return out;
}

RawConfig parse_raw_config(const char* raw_json) {
  if (!raw_json) throw invalid("config_normalize: raw config is NULL");
  const json j = json::parse(raw_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw invalid("config_normalize: the raw config is not a JSON object");
  RawConfig r;
  r.format = j.value("format", std::string());
  r.architecture = j.value("architecture", std::string());
  if (r.format != "hf" && r.format != "gguf") throw invalid("config_normalize: raw config format '" + r.format + "' is not hf or gguf");
  if (const json* c = member(j, "config")) r.config = *c;
  if (const json* g = member(j, "generation_config")) r.generation = *g;
  if (const json* m = member(j, "metadata")) r.metadata = *m;
  if (const json* t = member(j, "tensors")) r.tensors = *t;
  if (r.format == "hf" && !r.config.is_object()) throw invalid("config.json: not a JSON object");
  if (r.format == "hf") {
    // Multimodal wrappers keep the language model's fields in text_config.
    if (const json* tc = member(r.config, "text_config")) {
      if (!tc->is_object()) throw invalid("config.json: 'text_config' is not an object");
      json merged = *tc;
      for (const auto& [k, v] : r.config.items())
        if (k != "text_config" && k != "vision_config" && !merged.contains(k)) merged[k] = v;
      r.config = std::move(merged);
    }
  }
  if (r.format == "gguf" && !r.metadata.is_object()) throw invalid("GGUF config: metadata is not an object");
  return r;
}

const json* Fields::find(const std::string& key) const { return member(j_, prefix_ + key); }

void Fields::fail(const std::string& what) const { throw invalid(where_ + ": " + what); }
void Fields::unsupported(const std::string& what) const { throw PluginError(MEMRA_ERR_UNSUPPORTED, where_ + ": " + what); }

int64_t Fields::integer(const std::string& key, std::optional<int64_t> fallback) const {
  const json* v = find(key);
  if (!v) {
    if (fallback) return *fallback;
    fail("'" + name(key) + "' is missing");
  }
  if (v->is_array()) unsupported("'" + name(key) + "' varies per layer, which memra does not support yet");
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) return static_cast<int64_t>(v->get<double>());
  fail("'" + name(key) + "' is not an integer");
}

double Fields::number(const std::string& key, double fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_number()) fail("'" + name(key) + "' is not a number");
  return v->get<double>();
}

bool Fields::boolean(const std::string& key, bool fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail("'" + name(key) + "' is not a boolean");
  return v->get<bool>();
}

std::string Fields::string(const std::string& key, const std::string& fallback) const {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_string()) fail("'" + name(key) + "' is not a string");
  return v->get<std::string>();
}

std::vector<int64_t> Fields::ids(const std::string& key) const {
  std::vector<int64_t> out;
  const json* v = find(key);
  if (!v) return out;
  if (v->is_number_integer()) return {v->get<int64_t>()};
  if (!v->is_array()) fail("'" + name(key) + "' is not a token id or a list of them");
  for (const auto& e : *v) {
    if (!e.is_number_integer()) fail("'" + name(key) + "' holds a non-integer");
    out.push_back(e.get<int64_t>());
  }
  return out;
}

json hf_rope(const Fields& cfg, double default_theta, int64_t head_dim, int64_t max_pos) {
  json rope = rope_defaults(default_theta);
  rope["partial_rotary_factor"] = cfg.number("partial_rotary_factor", 1.0);
  if (const json* rp = cfg.find("rope_parameters")) {
    if (!rp->is_object()) cfg.fail("'rope_parameters' is not an object");
    if (rp->contains("full_attention") || rp->contains("sliding_attention") || rp->contains("linear_attention")) {
      // Per layer type (transformers 5).
      if (const json* full = member(*rp, "full_attention")) apply_rope_params(*full, rope, max_pos, cfg, "rope_parameters.full_attention");
      if (const json* slide = member(*rp, "sliding_attention")) {
        json local = rope;
        apply_rope_params(*slide, local, max_pos, cfg, "rope_parameters.sliding_attention");
        if (local["scaling"] != "none") cfg.unsupported("rope scaling on sliding-attention layers is not supported");
        rope["local_theta"] = local["theta"];
      }
    } else {
      apply_rope_params(*rp, rope, max_pos, cfg, "rope_parameters");
      const Fields p(*rp, cfg.where(), "", "rope_parameters.");
      rope["partial_rotary_factor"] = p.number("partial_rotary_factor", rope["partial_rotary_factor"].get<double>());
    }
  } else {
    rope["theta"] = cfg.number("rope_theta", default_theta);
    if (const json* rs = cfg.find("rope_scaling")) apply_rope_params(*rs, rope, max_pos, cfg, "rope_scaling");
    if (cfg.has("rope_local_base_freq")) rope["local_theta"] = cfg.number("rope_local_base_freq", 0);
  }
  set_rotary_dim(rope, head_dim, cfg);
  return rope;
}

json gguf_rope(const Fields& k, const RawConfig& raw, double default_theta, int64_t head_dim, int64_t max_pos,
               bool interleaved) {
  json rope = rope_defaults(k.number("rope.freq_base", default_theta));
  rope["interleaved"] = interleaved;
  const int64_t rotary_dim = k.integer("rope.dimension_count", head_dim);
  rope["rotary_dim"] = rotary_dim;
  rope["partial_rotary_factor"] = head_dim > 0 ? static_cast<double>(rotary_dim) / static_cast<double>(head_dim) : 1.0;
  std::string scaling = "none";
  if (k.has("rope.scaling.type")) scaling = k.string("rope.scaling.type", "none");
  else if (k.has("rope.scale_linear")) scaling = "linear";
  if (scaling == "linear") {
    rope["scaling"] = "linear";
    rope["factor"] = k.has("rope.scaling.factor") ? k.number("rope.scaling.factor", 0) : k.number("rope.scale_linear", 0);
  } else if (scaling == "yarn") {
    rope["scaling"] = "yarn";
    rope["factor"] = k.number("rope.scaling.factor", 0);
    rope["attention_factor"] = k.number("rope.scaling.attn_factor", 0);
    rope["beta_fast"] = k.number("rope.scaling.yarn_beta_fast", 32);
    rope["beta_slow"] = k.number("rope.scaling.yarn_beta_slow", 1);
    rope["original_max_position"] = k.integer("rope.scaling.original_context_length", max_pos);
  } else if (scaling != "none") {
    k.unsupported("rope scaling type '" + scaling + "' is not supported; supported: none, linear, yarn (llama3 via rope_freqs.weight)");
  }
  if (raw.has_tensor("rope_freqs.weight")) {
    // llama3-style scaling, baked into per-frequency factors by the converter.
    if (rope["scaling"] != "none") k.fail("both rope_freqs.weight and rope.scaling.type are present");
    rope["scaling"] = "llama3";
    rope["freq_factors_tensor"] = "rope_freqs.weight";
  }
  return rope;
}

void hf_special_tokens(const RawConfig& raw, json& out) {
  const Fields cfg(raw.config, "config.json");
  std::vector<int64_t> eos = cfg.ids("eos_token_id"), bos = cfg.ids("bos_token_id"), pad = cfg.ids("pad_token_id");
  if (!raw.generation.is_null()) {
    if (!raw.generation.is_object()) throw invalid("generation_config.json is not a JSON object");
    const Fields gen(raw.generation, "generation_config.json");
    auto geos = gen.ids("eos_token_id"), gbos = gen.ids("bos_token_id");
    if (!geos.empty()) eos = std::move(geos);
    if (!gbos.empty()) bos = std::move(gbos);
  }
  json list = json::array();
  for (int64_t id : eos) push_unique(list, id);
  out["eos_token_ids"] = list;
  out["bos_token_id"] = bos.empty() ? json(nullptr) : json(bos.front());
  out["pad_token_id"] = pad.empty() ? json(nullptr) : json(pad.front());
}

void gguf_special_tokens(const RawConfig& raw, json& out) {
  auto id = [&](const char* key) -> json {
    const json* v = member(raw.metadata, key);
    return v && v->is_number_integer() ? *v : json(nullptr);
  };
  out["bos_token_id"] = id("tokenizer.ggml.bos_token_id");
  out["pad_token_id"] = id("tokenizer.ggml.padding_token_id");
  json list = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const json e = id(key);
    if (!e.is_null()) push_unique(list, e.get<int64_t>());
  }
  out["eos_token_ids"] = list;
}

}  // namespace memra::family
