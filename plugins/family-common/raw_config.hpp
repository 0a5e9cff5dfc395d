// Readers for the raw config the host hands to config_normalize (docs/PLUGINS.md,
// "Raw configs"), shared by the built-in family plugins: typed field access with
// errors that name the key, RoPE parameters and special tokens in both source forms.
// A family plugin adds its architectures' defaults and writes the normalised config.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace memra::family {

using nlohmann::json;

// The raw document: {"format":"hf"|"gguf","architecture":..,"config":{..},
// "generation_config":{..}|null,"metadata":{..},"tensors":{name:{"dtype","shape"}}}.
struct RawConfig {
  std::string format;        // "hf" | "gguf"
  std::string architecture;  // HF architectures[0] or GGUF general.architecture
  json config;               // HF config.json (text_config merged in); empty for GGUF
  json generation;           // HF generation_config.json or null
  json metadata;             // GGUF metadata; empty for HF
  json tensors;              // name -> {"dtype", "shape" (outermost first)}

  bool has_tensor(const std::string& name) const { return tensors.is_object() && tensors.contains(name); }
  std::vector<int64_t> tensor_shape(const std::string& name) const;
};

// Throws PluginError (INVALID_ARGUMENT) when the document is malformed.
RawConfig parse_raw_config(const char* raw_json);

// Typed getters over one JSON object: absent or null -> the fallback (or an error
// naming the key when there is none); a wrong type -> an error naming the key.
class Fields {
 public:
  // key_prefix is part of every key looked up (GGUF "<arch>."); display_prefix only
  // names where a nested object sits in error messages ("rope_scaling.").
  Fields(const json& object, std::string where, std::string key_prefix = "", std::string display_prefix = "")
      : j_(object), where_(std::move(where)), prefix_(std::move(key_prefix)), display_(std::move(display_prefix)) {}
  const json* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  int64_t integer(const std::string& key, std::optional<int64_t> fallback) const;
  double number(const std::string& key, double fallback) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key, const std::string& fallback) const;
  // A token id field: an int, a list of ints, or absent/null (empty).
  std::vector<int64_t> ids(const std::string& key) const;
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void unsupported(const std::string& what) const;
  std::string name(const std::string& key) const { return display_ + prefix_ + key; }
  const std::string& where() const { return where_; }

 private:
  const json& j_;
  std::string where_, prefix_, display_;
};

// The normalised config's "rope" object from an HF config (rope_theta/rope_scaling of
// transformers 4, rope_parameters of 5, flat or per layer type). `default_theta` is
// the architecture's class default.
json hf_rope(const Fields& cfg, double default_theta, int64_t head_dim, int64_t max_positions);

// The same from GGUF metadata ("<arch>.rope.*"); `interleaved` is the family's fact
// about how its converter laid out q/k rows.
json gguf_rope(const Fields& meta, const RawConfig& raw, double default_theta, int64_t head_dim,
               int64_t max_positions, bool interleaved);

// bos/eos/pad ids into the normalised config: HF (generation_config.json wins where
// it says something) or the GGUF tokenizer keys.
void hf_special_tokens(const RawConfig& raw, json& out);
void gguf_special_tokens(const RawConfig& raw, json& out);

// The normalised config's version key (docs/FORMAT.md).
constexpr int kNormalisedConfigVersion = 2;

}  // namespace memra::family
