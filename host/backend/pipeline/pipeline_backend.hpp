// The pipeline backend: a Backend over N stage backends (CPU or CUDA), each holding
// a contiguous range of layers' weights and state (pipeline_split.hpp), behind one
// memra_backend_ops table, so a family plugin's forward pass runs unchanged.
//
// Routing: a named op (op_run) on the stage of args->layer, else like the fixed ops;
// an op with a weight (matmul, rms_norm, add_rms_norm, embedding) runs on a
// stage that holds the weight (the first such stage at or after where its inputs
// are); attention on the stage of params->layer, with the layer renumbered to that
// stage's KV cache; weight-less ops where their inputs are.
//
// Tensors: tensor_create hands out a composite: its `data` is an address in a
// reserved, inaccessible range that names a record with per-stage storage
// (allocated lazily by that stage's tensor_create) and the set of stages holding
// the current contents. Views (same data, another shape; or an offset inside) are
// translated by address, keeping the caller's shape. Before an op runs on stage s,
// every input not current on s is copied there (the activation hand-off); its
// outputs, including in-place ones, are then current on s only. Each stage is given
// the step's batch before its first op (PipelineStage::prepare_batch).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/common/result.hpp"
#include "host/backend/backend.hpp"
#include "host/backend/pipeline/pipeline_split.hpp"
#include "memra/backend.h"

namespace memra::backend {

class PipelineBackend final : public Backend {
 public:
  // `stages`: open backends, one per range of `plan`; `weights`: the whole model's (what
  // model_create binds); upload_weights gives each stage those plan.weight_stages() names.
  static Result<std::unique_ptr<PipelineBackend>> create(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan,
                                                         const std::vector<memra_weight>& weights);
  ~PipelineBackend() override;
  PipelineBackend(const PipelineBackend&) = delete;
  PipelineBackend& operator=(const PipelineBackend&) = delete;

  const PipelinePlan& plan() const { return plan_; }
  int32_t num_stages() const { return static_cast<int32_t>(stages_.size()); }
  Backend& stage(int32_t s) { return *stages_[static_cast<size_t>(s)]; }
  const Backend& stage(int32_t s) const { return *stages_[static_cast<size_t>(s)]; }

  // Backend
  std::string name() const override;
  std::string describe() const override { return name() + ": " + plan_.describe(); }
  memra_device_info device_info() const override { return stage(0).device_info(); }
  const memra_backend_ops* ops() const override { return &ops_; }
  std::string last_error() const override { return last_error_; }
  // Every stage registers the plugin's kernels (the plugin is refused if any stage refuses).
  Status register_kernels(const std::string& plugin, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added) override;
  // Each stage gets its own layers' weights (and the embedding / head where the plan puts them).
  Status upload_weights(const memra_weight_set& weights) override;
  // Each stage holds its layers' KV cache and recurrent state, renumbered from its first layer.
  Status allocate_state(const StateConfig& state) override;
  // Every stage's begin_step(slot), then this step's composite tensors are forgotten.
  Status begin_step(int32_t slot) override;
  Status wait_logits(int32_t slot) override;
  bool defers_slot_logits() const override;
  // While set, logits_output only notes its tensor; flush_logits() then hands every noted
  // one to the host in order. Lets several micro-batches be issued before the host waits
  // (a CUDA stage's logits_output waits for its stream), so the stages overlap.
  void set_defer_logits(bool on) override { defer_logits_ = on; }
  Status flush_logits() override;
  // Prefix-cache copy-on-write: the block in every stage's layers.
  Status copy_kv_block(int32_t from, int32_t to) override;
  // Recurrent state slots on every stage (a stage without recurrent layers has none to copy).
  Status copy_state_slot(int32_t from, int32_t to) override;
  Status reset_state_slot(int32_t slot) override;
  // On the stage that took this step's logits, when every stage samples on its device.
  bool samples_on_device() const override;
  Status sample_rows(const SampleRequest& request, int32_t* tokens) override;
  Status logits_rows_to_host(std::span<const int32_t> rows, float* dst) override;
  // A pipeline is never a stage of another: its tensors are composites.
  Status copy_from(Backend&, void*, const void*, uint64_t) override { return not_memory(); }
  Status copy_to_host(void*, const void*, uint64_t) override { return not_memory(); }
  Status copy_to_device(void*, const void*, uint64_t) override { return not_memory(); }
  Result<memra_buffer> memory_alloc(memra_memory_location, uint64_t) override { return not_memory(); }
  void memory_free(memra_buffer&) override {}
  // Every stage's counters summed, with the hand-off copies since the last begin_step.
  BackendStats stats() const override;

  // Ops (public for the C trampolines).
  memra_status tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out);
  memra_status embedding(const memra_weight* table, const memra_forward_batch* batch, float scale, memra_tensor* out);
  memra_status rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset, memra_tensor* out);
  memra_status add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w, float eps,
                            float unit_offset, memra_tensor* out);
  memra_status add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out);
  memra_status matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias, memra_tensor* out);
  memra_status gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up, memra_tensor* out);
  memra_status attention(const memra_attention_params* p, const memra_forward_batch* batch, memra_tensor* q,
                         memra_tensor* k, const memra_tensor* v, memra_tensor* out);
  memra_status gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch, memra_tensor* out);
  memra_status logits_output(const memra_tensor* logits, const memra_forward_batch* batch);
  memra_status op_find(const char* name, uint32_t attrs_version, const memra_op** out);
  memra_status op_run(const memra_op* op, const memra_op_args* args);
  memra_status fail(memra_status code, std::string message);

  // How an op uses a tensor argument.
  enum class Use { in, out, inout };
  struct Arg {
    const memra_tensor* t;
    Use use;
  };

 private:
  struct Record {
    uintptr_t base = 0;   // the composite's address
    uint64_t bytes = 0;
    int32_t ndim = 0;
    int64_t shape[4] = {};
    std::vector<void*> storage;  // per stage; nullptr until used there
    uint32_t valid = 0;          // stages holding the current contents
  };
  PipelineBackend(std::vector<std::unique_ptr<Backend>> stages, PipelinePlan plan);
  Error not_memory() const { return make_error(ErrorCode::unsupported, "a pipeline backend has no memory of its own"); }
  Error stage_error(int32_t s, const Error& e) const;

  Record* find(const void* data, uint64_t* offset);
  memra_status ensure_storage(Record& r, int32_t s);
  memra_status make_current(Record& r, int32_t s);
  // The highest stage holding an input's contents (-1: none written yet).
  int32_t inputs_stage(const Arg* args, size_t n);
  // Where an op with weight `w` runs, given its inputs.
  int32_t weight_stage(const memra_weight* w, int32_t from) const;
  // Translates args to stage s (copying inputs there), runs `call` on the local
  // descriptors, then marks the outputs current on s only.
  template <size_t N, class F>
  memra_status run(int32_t s, const Arg (&args)[N], F&& call);
  // run's halves, for ops with any number of tensors (ops by name): bind fills local[n]
  // with stage s's descriptors; finish reports a failure or marks the outputs.
  memra_status bind(int32_t s, const Arg* args, size_t n, Record** recs, memra_tensor* local);
  memra_status finish(int32_t s, memra_status st, const Arg* args, size_t n, Record** recs);
  memra_status note_batch(const memra_forward_batch* batch);

  std::vector<std::unique_ptr<Backend>> stages_;
  std::vector<memra_weight> weights_;  // the whole model's
  PipelinePlan plan_;
  std::unordered_map<const void*, uint32_t> weight_masks_;  // by host address
  std::map<std::pair<const void*, int32_t>, const memra_op*> stage_ops_;  // (op spec, stage) -> stage's handle
  std::vector<Record> records_;                             // this step's, by base
  uintptr_t space_ = 0;                                     // reserved address range
  uint64_t space_size_ = 0, space_used_ = 0;
  struct DeferredLogits {
    int32_t stage;
    memra_tensor local;
    const memra_forward_batch* batch;
  };
  bool defer_logits_ = false;
  std::vector<DeferredLogits> deferred_;
  const memra_forward_batch* batch_ = nullptr;  // this step's, from the first op that takes it
  int32_t logits_stage_ = -1;                    // the stage that took this step's logits
  uint32_t prepared_ = 0;                        // stages given batch_ this step
  int64_t handoffs_ = 0;
  uint64_t handoff_bytes_ = 0;
  std::string last_error_;
  memra_backend_ops ops_{};
};

}  // namespace memra::backend
