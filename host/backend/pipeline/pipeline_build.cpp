#include "host/backend/pipeline/pipeline_build.hpp"

#include <algorithm>

namespace memra::backend {

Result<std::unique_ptr<PipelineBackend>> make_pipeline_backend(const std::vector<memra_weight>& weights,
                                                               const PipelineOptions& o) {
  const KvCacheConfig& kv = o.kv;
  PipelineSplitOptions so;
  so.stages = o.stages;
  so.split = o.split;
  for (size_t l = 0; l < kv.layers.size(); ++l) so.kv_bytes_per_layer.push_back(2 * kv.layer_bytes(l));
  auto plan = plan_pipeline(weights, kv.num_layers(), so);
  if (!plan) return plan.error();
  std::vector<int> devices = o.devices;
  if (devices.empty())
    for (int32_t s = 0; s < o.stages; ++s) devices.push_back(s);
  const bool cuda = o.stage.kind == MEMRA_BACKEND_CUDA;
  if (cuda && static_cast<int32_t>(devices.size()) != o.stages)
    return make_error(ErrorCode::invalid_argument, "the pipeline lists " + std::to_string(devices.size()) + " devices for " +
                                                       std::to_string(o.stages) + " stages; give one per stage");
  std::vector<std::unique_ptr<Backend>> stages;
  for (int32_t s = 0; s < plan->stages(); ++s) {
    BackendOptions bo = o.stage;
    bo.device = devices[static_cast<size_t>(s) % devices.size()];
    auto b = open_backend(bo);
    if (!b) {
      const int64_t first = plan->first_layer[static_cast<size_t>(s)];
      return make_error(b.error().code, "pipeline stage " + std::to_string(s) + " (layers " + std::to_string(first) + "-" +
                                            std::to_string(first + plan->num_layers[static_cast<size_t>(s)] - 1) + ")" +
                                            (cuda ? " on CUDA device " + std::to_string(bo.device) : std::string()) + ": " +
                                            b.error().message);
    }
    stages.push_back(std::move(*b));
  }
  return PipelineBackend::create(std::move(stages), std::move(*plan));
}

}  // namespace memra::backend
