// Pipeline stages: which contiguous range of layers each stage holds, and on which
// stages each weight lives. Layers are split by measured memory (each layer's weight
// bytes plus its KV cache bytes; the embedding table counts for the first stage, the
// output head for the last), or by an explicit per-stage layer count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "memra/family.h"

namespace memra::backend {

constexpr int32_t kMaxPipelineStages = 32;  // stage sets are 32-bit masks

struct PipelinePlan {
  int64_t layers = 0;
  std::vector<int64_t> first_layer;     // per stage
  std::vector<int64_t> num_layers;      // per stage
  std::vector<int32_t> layer_stage;     // per layer
  std::vector<uint64_t> weight_bytes;   // per stage: the weights it holds
  std::vector<uint64_t> kv_bytes;       // per stage: its layers' KV cache
  bool tied_output = false;             // no output.weight: token_embd is the head too

  int32_t stages() const { return static_cast<int32_t>(first_layer.size()); }
  // Stages (bit s = stage s) that hold the weight named `name`.
  uint32_t weight_stages(std::string_view name) const;
  // "stage 0: layers 0-17, 7.31 GB weights + 1.21 GB KV; stage 1: ..." for logs and tools.
  std::string describe() const;
};

struct PipelineSplitOptions {
  int32_t stages = 1;
  // Layers per stage, first stage first. stages-1 entries leave the rest to the last
  // stage; empty = balanced by memory.
  std::vector<int64_t> split;
  std::vector<uint64_t> kv_bytes_per_layer;  // per layer: its K and V over the whole cache (absent: 0)
};

// Index L of a weight named "blk.<L>.<...>", else -1.
int64_t weight_layer(std::string_view name);

// The stage plan for a model with `num_layers` layers and these weights. Fails with a
// clear message when a stage would hold no layers or the split does not add up.
Result<PipelinePlan> plan_pipeline(const std::vector<memra_weight>& weights, int64_t num_layers,
                                   const PipelineSplitOptions& options);

}  // namespace memra::backend
