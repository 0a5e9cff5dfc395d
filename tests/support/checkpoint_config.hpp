// A checkpoint's normalised config and tensor names as the engine gets them: read
// through the family plugin of this build that serves its architecture.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "repack/checkpoint/checkpoint_family.hpp"
#include "repack/checkpoint/gguf.hpp"
#include "repack/checkpoint/safetensors.hpp"
#include "tests/support/build_plugins.hpp"

namespace memra::testing {

// A Hugging Face directory (config.json + safetensors).
inline Result<CheckpointFamily> hf_family(const std::string& dir) {
  auto ckpt = safetensors::Checkpoint::open(dir);
  if (!ckpt) return ckpt.error();
  auto raw = raw_config_from_hf(dir, *ckpt);
  if (!raw) return raw.error();
  return normalize_checkpoint(*raw, build_plugins());
}

inline Result<ModelConfig> hf_config(const std::string& dir) {
  auto f = hf_family(dir);
  if (!f) return f.error();
  return f->config;
}

// config.json text alone (+ generation_config.json text).
inline Result<ModelConfig> hf_config_from_json(const std::string& config_json, const std::string& generation_json = {}) {
  auto raw = raw_config_from_hf_json(config_json, generation_json);
  if (!raw) return raw.error();
  auto f = normalize_checkpoint(*raw, build_plugins());
  if (!f) return f.error();
  return f->config;
}

inline Result<ModelConfig> gguf_config(const gguf::File& file) {
  auto raw = raw_config_from_gguf(file);
  if (!raw) return raw.error();
  auto f = normalize_checkpoint(*raw, build_plugins());
  if (!f) return f.error();
  return f->config;
}

// The family's keys of a normalised config (heads, RoPE, norms, experts, layer kinds: the
// host does not read them; family-llama's are in docs/FORMAT.md's table).
inline nlohmann::json family_keys(const ModelConfig& c) { return nlohmann::json::parse(c.family_json); }

}  // namespace memra::testing
