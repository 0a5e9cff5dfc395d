// The pipeline backend: a Backend over N stage backends (CPU or CUDA), each holding a
// contiguous range of layers' weights and state (pipeline_split.hpp). It partitions the
// model by layer, not by op: each stage runs its own instance of the family plugin's
// model over its layer range (memra_forward_batch.layer_begin / layer_end, ABI 2.2) on
// its own op table, and the tensors a range leaves for the next one (carry_out) are
// copied to the next stage (the hand-off) and passed in as carry_in. The stages run the
// same ops on the same rows as one backend does, so the logits are bitwise the same.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "host/backend/backend.hpp"
#include "host/backend/pipeline/pipeline_split.hpp"
#include "memra/backend.h"

namespace memra::backend {

class PipelineBackend final : public Backend {
 public:
  // `stages`: open backends, one per range of `plan`; `weights`: the whole model's;
  // upload_weights gives each stage those plan.weight_stages() names.
  static Result<std::unique_ptr<PipelineBackend>> create(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan);

  const PipelinePlan& plan() const { return plan_; }
  int32_t num_stages() const { return static_cast<int32_t>(stages_.size()); }
  Backend& stage(int32_t s) { return *stages_[static_cast<size_t>(s)]; }
  const Backend& stage(int32_t s) const { return *stages_[static_cast<size_t>(s)]; }

  // Backend
  std::string name() const override;
  std::string describe() const override { return name() + ": " + plan_.describe(); }
  memra_device_info device_info() const override { return stage(0).device_info(); }
  // The first stage's table; a model runs once per stage on op_tables().
  const memra_backend_ops* ops() const override { return stage(0).ops(); }
  std::vector<const memra_backend_ops*> op_tables() const override;
  std::string last_error() const override { return last_error_; }
  // Every stage registers the plugin's kernels (the plugin is refused if any stage refuses).
  Status register_kernels(const std::string& plugin, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added) override;
  // Each stage, with its own kernel services bound (plugin_kernels.hpp register_plugin_ops).
  Status register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) override;
  // Each stage gets its own layers' weights (and the embedding / head where the plan puts them).
  Status upload_weights(const memra_weight_set& weights) override;
  // Each stage holds its layers' KV cache and recurrent state (KvCacheConfig::first_layer).
  Status allocate_state(const StateConfig& state) override;
  // The stages in order: each stage's model over its range, then the hand-off.
  Status forward(const memra_forward_batch& batch, const ForwardFn& fn) override;
  // Every stage's begin_step(slot).
  Status begin_step(int32_t slot) override;
  Status wait_logits(int32_t slot) override;
  bool defers_slot_logits() const override;
  // Prefix-cache copy-on-write: the block in every stage's layers.
  Status copy_kv_block(int32_t pool, int32_t from, int32_t to) override;
  // Recurrent state slots on every stage (a stage without recurrent layers has none to copy).
  Status copy_state_slot(int32_t from, int32_t to) override;
  Status reset_state_slot(int32_t slot) override;
  // On the last stage (it produces the logits), when it samples on its device.
  bool samples_on_device() const override { return stage(num_stages() - 1).samples_on_device(); }
  Status sample_rows(const SampleRequest& request, int32_t* tokens) override;
  Status logits_rows_to_host(std::span<const int32_t> rows, float* dst) override;
  // A pipeline is never a stage of another, and has no memory of its own.
  Status copy_from(Backend&, void*, const void*, uint64_t) override { return not_memory(); }
  Status copy_to_host(void*, const void*, uint64_t) override { return not_memory(); }
  Status copy_to_device(void*, const void*, uint64_t) override { return not_memory(); }
  Result<memra_buffer> memory_alloc(memra_memory_location, uint64_t) override { return not_memory(); }
  void memory_free(memra_buffer&) override {}
  // Every stage's counters summed, with the hand-off copies since the last begin_step.
  BackendStats stats() const override;

 private:
  PipelineBackend(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan);
  Error not_memory() const { return make_error(ErrorCode::unsupported, "a pipeline backend has no memory of its own"); }
  Error stage_error(int32_t s, const Error& e) const;
  Status fail(Error e);

  std::vector<std::unique_ptr<Backend>> stages_;
  PipelinePlan plan_;
  std::string last_error_;
  int64_t handoffs_ = 0;
  uint64_t handoff_bytes_ = 0;
};

}  // namespace memra::backend
