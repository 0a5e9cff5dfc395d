// Builds a pipeline backend for a model: plans the layer split and opens one stage
// backend per range (CPU reference, or CUDA on the stage's device). Weights and state
// go to the stages later, through the pipeline's upload_weights / allocate_state.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/common/result.hpp"
#include "host/backend/backend.hpp"
#include "host/backend/pipeline/pipeline_backend.hpp"

namespace memra::backend {

struct PipelineOptions {
  int32_t stages = 2;
  std::vector<int64_t> split;  // PipelineSplitOptions::split
  std::vector<int> devices;    // CUDA device per stage; empty = 0..stages-1
  BackendOptions stage;        // every stage's options (its device from `devices`)
  KvCacheConfig kv;            // the whole model's KV geometry: weighs the split
};

Result<std::unique_ptr<PipelineBackend>> make_pipeline_backend(const std::vector<memra_weight>& weights,
                                                               const PipelineOptions& options);

}  // namespace memra::backend
