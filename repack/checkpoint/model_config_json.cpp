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
  json j = {
      {"memra_config_version", ModelConfig::kJsonVersion},
      {"architecture", c.architecture},
      {"family", c.family},
      {"model_type", c.model_type},
      {"source_format", c.source_format},
      {"dtype", c.dtype},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"num_layers", c.num_layers},
      {"max_position_embeddings", c.max_position_embeddings},
      {"tie_word_embeddings", c.tie_word_embeddings},
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
  r.i64("num_layers", c.num_layers);
  r.i64("max_position_embeddings", c.max_position_embeddings, false);
  r.boolean("tie_word_embeddings", c.tie_word_embeddings, false);
  r.opt_i64("bos_token_id", c.bos_token_id);
  r.i64_list("eos_token_ids", c.eos_token_ids);
  r.opt_i64("pad_token_id", c.pad_token_id);
  if (!r.error.empty()) return bad(r.error);
  MEMRA_TRY(validate(c));
  c.family_json = std::string(text);
  return c;
}

}  // namespace memra
