// Builds a pipeline backend for a model: plans the layer split, creates one stage
// backend per range (CPU reference, or CUDA on the stage's device, uploading only
// that stage's weights) and sizes each stage's KV cache for its own layers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host/backend_cpu/cpu_backend.hpp"
#include "host/backend_cuda/cuda_backend_loader.hpp"
#include "core/common/result.hpp"
#include "host/engine/pipeline_backend.hpp"

namespace memra::engine {

struct PipelineBuildOptions {
  int32_t stages = 2;
  std::vector<int64_t> split;  // PipelineSplitOptions::split
  memra_backend_kind backend = MEMRA_BACKEND_CPU;
  backend::CudaBackendOpenOptions cuda;  // the device comes from `devices`
  std::vector<int> devices;              // per stage; empty = 0..stages-1
  backend::KvCacheConfig kv;             // the whole model's geometry (kv.layers = all layers)
  backend::QuantLookup quant_lookup;     // CPU stages
  backend::RecurrentStateConfig state;   // the whole model's (layer_bytes over all layers)
};

Result<std::unique_ptr<PipelineBackend>> make_pipeline_backend(const std::vector<memra_weight>& weights,
                                                               const PipelineBuildOptions& options);

}  // namespace memra::engine
