// The raw config a family plugin's config_normalize reads (docs/PLUGINS.md, "Raw
// configs"): what a checkpoint says about itself, as JSON, with no interpretation —
// the host knows no architecture. Hugging Face: config.json, generation_config.json
// and the tensor list; GGUF: the metadata (arrays longer than kMaxRawArray given as
// {"length": N}) and the tensor list.
#pragma once

#include <string>

#include "core/common/result.hpp"

namespace memra {

namespace gguf {
class File;
}
namespace safetensors {
class Checkpoint;
}

struct RawConfig {
  std::string format;        // "hf" | "gguf"
  std::string architecture;  // HF architectures[0] or GGUF general.architecture: picks the family
  std::string json;          // the document config_normalize receives
};

constexpr size_t kMaxRawArray = 1024;

// From a checkpoint directory (config.json required, generation_config.json optional).
Result<RawConfig> raw_config_from_hf(const std::string& dir, const safetensors::Checkpoint& tensors);
// From config.json text (+ optional generation_config.json text), no tensors (tools, tests).
Result<RawConfig> raw_config_from_hf_json(const std::string& config_text, const std::string& generation_text = {});
Result<RawConfig> raw_config_from_gguf(const gguf::File& file);

}  // namespace memra
