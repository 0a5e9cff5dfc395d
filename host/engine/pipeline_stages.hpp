// One stage of a pipeline backend: a whole backend (the CPU reference or a CUDA
// backend on some device) holding a range of layers' weights and KV cache, plus the
// hand-off copy that moves an activation tensor into it from another stage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/backend_cpu/cpu_backend.hpp"
#include "host/backend_cuda/cuda_backend_loader.hpp"
#include "core/common/result.hpp"
#include "memra/backend.h"

namespace memra::engine {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual const memra_backend_ops* ops() const = 0;
  virtual Status allocate_kv() = 0;
  virtual Status begin_step() = 0;
  // Step slots (rolling steps, cuda_backend_api.h begin_step_slot): a step in slot 0 or
  // 1 waits only for that slot's previous step, and its logits arrive with
  // wait_logits(slot). A CPU stage computes as its ops are called: the plain
  // begin_step, nothing to wait for.
  virtual Status begin_step_slot(int32_t) { return begin_step(); }
  virtual Status wait_logits(int32_t) { return {}; }
  // Device sampling of the logits this stage kept (cuda_backend_api.h sample_rows; in a
  // slot step the tokens arrive with wait_logits). Only CUDA stages have it.
  virtual Status sample_rows(const memra_cuda_sample_request&, int32_t*) {
    return make_error(ErrorCode::unsupported, "device sampling needs a CUDA stage");
  }
  virtual Status copy_kv_block(int32_t from, int32_t to) = 0;
  // Recurrent state slots of this stage's layers (CpuBackend::copy_state_slot); only CPU
  // stages hold recurrent state today (the engine refuses RECURRENT plans on CUDA).
  virtual Status copy_state_slot(int32_t, int32_t) { return make_error(ErrorCode::unsupported, "recurrent state needs a CPU stage"); }
  virtual Status reset_state_slot(int32_t) { return make_error(ErrorCode::unsupported, "recurrent state needs a CPU stage"); }
  virtual std::string last_error() const = 0;
  // Copies `bytes` at `src` (storage of `from`'s ops) to `dst` (this stage's), after
  // the work `from` has been given so far; later work on either side sees the copy.
  virtual Status copy_from(PipelineStage& from, void* dst, const void* src, uint64_t bytes) = 0;
  // Called before the stage's first op of a step, with the step's batch: ops without a
  // batch argument may depend on it (the CUDA backend's prompt-row matmul path).
  virtual Status prepare_batch(const memra_forward_batch&) { return {}; }
  virtual std::string name() const = 0;  // "cpu", "cuda:1"
  // The CUDA backend behind this stage, or nullptr (CPU).
  virtual backend::CudaBackendHandle* cuda() { return nullptr; }
};

// A CPU reference stage: `kv.layers` is this stage's layer count; `state` its layers'
// recurrent state (stage-local layer numbers).
std::unique_ptr<PipelineStage> make_cpu_stage(const backend::KvCacheConfig& kv, backend::QuantLookup quant_lookup,
                                              backend::RecurrentStateConfig state = {});

// A CUDA stage on options.device: uploads `weights` (only this stage's) now; the KV
// cache (`kv.layers` = this stage's layer count) comes with allocate_kv().
Result<std::unique_ptr<PipelineStage>> make_cuda_stage(const backend::CudaBackendOpenOptions& options,
                                                       const std::vector<memra_weight>& weights,
                                                       const memra_cuda_kv_config& kv);

}  // namespace memra::engine
