// Model variants for the pipeline tests (CPU and CUDA): the 2-layer fixtures widened
// to more layers (layers repeated, same weight data) so that 3 and 4 stages exist,
// and with tied embeddings (output.weight dropped, the table is the head).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/engine/model_source.hpp"
#include "host/backend/pipeline/pipeline_split.hpp"
#include "repack/checkpoint/model_config.hpp"

namespace memra::pipeline_test {

inline void refresh_config(engine::ModelSource& s) { s.config_json = model_config_to_json(s.config); }

// Repeats the model's layers (blk.L -> blk.L+n, same data) up to `layers`.
inline void widen(engine::ModelSource& s, int64_t layers) {
  const int64_t base = s.config.num_layers;
  std::vector<memra_weight> extra;
  for (int64_t l = base; l < layers; ++l)
    for (const memra_weight& w : s.weights) {
      const int64_t src = backend::weight_layer(w.name);
      if (src != l % base) continue;
      const std::string prefix = "blk." + std::to_string(src) + ".";
      s.strings.push_back("blk." + std::to_string(l) + "." + std::string(w.name).substr(prefix.size()));
      memra_weight copy = w;
      copy.name = s.strings.back().c_str();
      extra.push_back(copy);
    }
  s.weights.insert(s.weights.end(), extra.begin(), extra.end());
  // The family's per-layer keys (layer_types) repeat with the layers.
  nlohmann::json family = nlohmann::json::parse(s.config.family_json);
  if (family.contains("layer_types") && family["layer_types"].is_array() && !family["layer_types"].empty()) {
    const nlohmann::json kinds = family["layer_types"];
    family["layer_types"] = nlohmann::json::array();
    for (int64_t l = 0; l < layers; ++l) family["layer_types"].push_back(kinds[static_cast<size_t>(l % base)]);
  }
  s.config.family_json = family.dump();
  s.config.num_layers = layers;
  refresh_config(s);
}

// The output head becomes the embedding table (tie_word_embeddings).
inline void tie(engine::ModelSource& s) {
  std::erase_if(s.weights, [](const memra_weight& w) { return std::string(w.name) == "output.weight"; });
  s.config.tie_word_embeddings = true;
  refresh_config(s);
}

}  // namespace memra::pipeline_test
