// memra::ModelConfig — one normalised description of a model's architecture. A
// family plugin's config_normalize writes it (as JSON) from a checkpoint's raw
// config (repack/checkpoint/checkpoint_family.hpp); the host reads and checks it
// here, and hands the JSON form to the plugin's plan_create. The host itself knows
// no architecture.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra {

struct ModelConfig {
  // 2: `family` is the name of the family plugin that normalised the config.
  static constexpr int kJsonVersion = 2;

  std::string architecture;  // the checkpoint's architecture as the family names it (its HF class)
  std::string family;        // the family plugin that wrote this config (and plans it)
  std::string model_type;    // HF model_type or GGUF general.architecture, as written
  std::string source_format; // "hf" | "gguf"
  std::string dtype;         // HF "dtype"/"torch_dtype" ("bfloat16"); empty for GGUF

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;  // the residual stream's width (embedding pooling reads it)
  int64_t num_layers = 0;   // the plan must have as many
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;  // the output head is the embedding table (repack keeps one copy)

  // Everything else -- heads, RoPE, norms, MLP and experts, layer kinds, windows, a hybrid's
  // recurrent sizes, soft-caps -- is the family's (family_json), which the host never reads.

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // generation_config's list when present
  std::optional<int64_t> pad_token_id;

  // The family's normalised config as it wrote it (model_config_from_json keeps the text):
  // keys the host does not read pass through to the family's plan_create, a .memra manifest
  // and back, so a family needs no host field for its own settings.
  std::string family_json;
};

// The JSON the family plugin receives, and back. from_json reads and checks the fields
// above and keeps the text; to_json writes the fields above (so a changed field shows)
// plus every other key of family_json, unchanged.
std::string model_config_to_json(const ModelConfig& c);
Result<ModelConfig> model_config_from_json(std::string_view json);

// The checks every family's config must pass (positive sizes, special tokens inside the
// vocabulary); the family checks its own keys when it plans.
Status validate(const ModelConfig& c);

}  // namespace memra
