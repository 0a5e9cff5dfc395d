// A checkpoint read through the family plugin that serves its architecture: the
// normalised config (the plugin's config_normalize, checked by the host) and the
// plugin itself, which names the checkpoint's tensors. The host keeps no
// architecture list: the raw config's architecture picks the plugin.
#pragma once

#include <optional>
#include <string>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "repack/checkpoint/raw_config.hpp"

namespace memra {

struct CheckpointFamily {
  plugins::FamilyPlugin plugin;
  ModelConfig config;
  std::string format;  // "hf" | "gguf": what tensor_name is asked about

  // The canonical name of a checkpoint tensor; nullopt when the family does not read it.
  Result<std::optional<std::string>> canonical_name(const std::string& source_name) const {
    return plugin.tensor_name(format, source_name);
  }
};

Result<CheckpointFamily> normalize_checkpoint(const RawConfig& raw, const plugins::PluginHost& plugins);

}  // namespace memra
