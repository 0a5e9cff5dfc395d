#include "host/engine/pipeline_build.hpp"

#include <algorithm>

namespace memra::engine {

Result<std::unique_ptr<PipelineBackend>> make_pipeline_backend(const std::vector<memra_weight>& weights,
                                                               const PipelineBuildOptions& o) {
  const backend::KvCacheConfig& kv = o.kv;
  PipelineSplitOptions so;
  so.stages = o.stages;
  so.split = o.split;
  so.kv_bytes_per_layer = 2ull * static_cast<uint64_t>(kv.num_blocks * kv.block_size * kv.kv_heads * kv.head_dim) *
                          std::max<uint64_t>(1, backend::kv_element_bytes(kv.dtype));
  auto plan = plan_pipeline(weights, kv.layers, so);
  if (!plan) return plan.error();
  std::vector<int> devices = o.devices;
  if (devices.empty())
    for (int32_t s = 0; s < o.stages; ++s) devices.push_back(s);
  if (o.backend == MEMRA_BACKEND_CUDA && static_cast<int32_t>(devices.size()) != o.stages)
    return make_error(ErrorCode::invalid_argument, "the pipeline lists " + std::to_string(devices.size()) + " devices for " +
                                                       std::to_string(o.stages) + " stages; give one per stage");

  std::vector<std::unique_ptr<PipelineStage>> stages;
  for (int32_t s = 0; s < plan->stages(); ++s) {
    backend::KvCacheConfig skv = kv;
    skv.layers = plan->num_layers[static_cast<size_t>(s)];
    // The stage's layers' recurrent state, renumbered from its first layer (as its KV is).
    backend::RecurrentStateConfig sst;
    sst.slots = o.state.slots;
    const auto first = static_cast<size_t>(plan->first_layer[static_cast<size_t>(s)]);
    for (size_t l = first; l < first + static_cast<size_t>(skv.layers) && l < o.state.layer_bytes.size(); ++l)
      sst.layer_bytes.push_back(o.state.layer_bytes[l]);
    if (o.backend != MEMRA_BACKEND_CUDA) {
      stages.push_back(make_cpu_stage(skv, o.quant_lookup, std::move(sst)));
      continue;
    }
    // Only this stage's weights go to its GPU.
    std::vector<memra_weight> mine;
    for (const memra_weight& w : weights)
      if (plan->weight_stages(w.name ? w.name : "") & (1u << s)) mine.push_back(w);
    backend::CudaBackendOpenOptions co = o.cuda;
    co.device = devices[static_cast<size_t>(s)];
    const memra_cuda_kv_config ckv{MEMRA_CUDA_KV_CONFIG_STRUCT_SIZE, skv.layers, skv.kv_heads, skv.head_dim, skv.block_size, skv.num_blocks, skv.dtype};
    auto stage = make_cuda_stage(co, mine, ckv);
    if (!stage)
      return make_error(stage.error().code, "pipeline stage " + std::to_string(s) + " (layers " +
                                                std::to_string(plan->first_layer[static_cast<size_t>(s)]) + "-" +
                                                std::to_string(plan->first_layer[static_cast<size_t>(s)] + skv.layers - 1) +
                                                ") on CUDA device " + std::to_string(co.device) + ": " + stage.error().message);
    stages.push_back(std::move(*stage));
  }
  return PipelineBackend::create(std::move(stages), std::move(*plan), weights);
}

}  // namespace memra::engine
