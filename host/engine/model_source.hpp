// Opens a model for the engine: a Hugging Face safetensors directory, a .gguf file or
// a .memra directory (memra-repack's output, docs/FORMAT.md), read in place
// (memory-mapped), with its normalised config and its weights
// under canonical names in the layouts the quant plugins own. Matrices are carried
// as stored (bf16/f16/f32 or ggml blocks); 1-D tensors (norms, biases) are
// converted exactly to float32, which is what the backend ops take.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "memra/family.h"
#include "repack/checkpoint/model_config.hpp"

namespace memra::engine {

struct ModelSource {
  std::string path;
  std::string format;        // "safetensors" | "gguf" | "memra"
  ModelConfig config;
  std::string config_json;   // model_config_to_json(config): what plan_create receives
  std::vector<memra_weight> weights;

  memra_weight_set weight_set() const {
    return {MEMRA_WEIGHT_SET_STRUCT_SIZE, weights.size(), weights.data()};
  }
  // Storage the weight descriptors point into.
  std::shared_ptr<const void> mapping;  // the mapped checkpoint (kept open)
  std::deque<std::string> strings;      // names and scheme names
  std::deque<std::vector<float>> f32;   // converted 1-D tensors
  std::deque<std::vector<uint8_t>> assembled;  // tensors the family assembles from parts (tensor_parts)
};

// `path`: a directory with config.json + *.safetensors, a .gguf file, or a .memra
// directory (manifest.json + blobs; its 1-D tensors are stored as float32 already).
// Checkpoints are read through the family plugin serving their architecture
// (config normalisation and tensor names); a .memra directory holds both already.
Result<std::unique_ptr<ModelSource>> open_model_source(const std::string& path, const plugins::PluginHost& plugins);

}  // namespace memra::engine
