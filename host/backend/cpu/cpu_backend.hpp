// The CPU reference backend: memra_backend_ops implemented with the kernels'
// CPU references (kernels/*/*_ref.cpp), float32 activations and accumulation.
// It is the oracle for the CUDA backend and lets CI run the engine without a GPU;
// it is deliberately plain, not tuned.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "host/backend/backend.hpp"
#include "host/ops/op_registry.hpp"
#include "memra/backend.h"
#include "memra/quant.h"

namespace memra::backend {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(QuantLookup quant_lookup);
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  // Backend
  std::string name() const override { return "cpu"; }
  memra_device_info device_info() const override;
  MemoryInfo memory_info() const override;
  const memra_backend_ops* ops() const override { return &ops_; }
  std::string last_error() const override { return last_error_; }
  // The plugin's ops run their CPU references (memra_op_def.run_cpu); none is refused.
  Status register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) override;
  // Weights stay where they are: the ops read the host copies.
  Status upload_weights(const memra_weight_set&) override { return {}; }
  // The KV cache and the recurrent state, zeroed. Refuses a KV dtype other than F32 or BF16.
  Status allocate_state(const StateConfig& state) override;
  // Frees the previous step's scratch tensors (every op computes at once: slots need nothing else).
  Status begin_step(int32_t slot) override;
  // The step's row kinds for matmul, which takes no batch (its prompt rows); embedding
  // and attention note the batch too, a pipeline stage whose first ops are matmuls
  // gets it here.
  Status prepare_batch(const memra_forward_batch& batch) override;
  Status copy_kv_block(int32_t pool, int32_t from, int32_t to) override;
  // Recurrent state slots, every layer that keeps state: copy (fork, snapshot, restore)
  // and zero (a new sequence). invalid_argument for a slot out of range.
  Status copy_state_slot(int32_t from, int32_t to) override;
  Status reset_state_slot(int32_t slot) override;
  // Host memory: another backend's tensors come through its copy_to_host.
  Status copy_from(Backend& from, void* dst, const void* src, uint64_t bytes) override {
    return from.copy_to_host(dst, src, bytes);
  }
  Status copy_to_host(void* dst, const void* src, uint64_t bytes) override;
  Status copy_to_device(void* dst, const void* src, uint64_t bytes) override;
  Result<memra_buffer> memory_alloc(memra_memory_location location, uint64_t bytes) override;
  void memory_free(memra_buffer& buffer) override;

  const KvCacheConfig& kv_config() const { return kv_; }
  const RecurrentStateConfig& state_config() const { return state_; }
  // Layer `layer`'s state of `slot`, or nullptr (no state there, or out of range).
  uint8_t* state_block(int32_t layer, int32_t slot);

  // Op implementations (public so the C trampolines can reach them).
  memra_status tensor_create(int32_t ndim, const int64_t* shape, memra_tensor* out);
  memra_status embedding(const memra_weight* table, const memra_forward_batch* batch, float scale,
                         memra_tensor* out);
  memra_status rms_norm(const memra_tensor* x, const memra_weight* w, float eps, float unit_offset,
                        memra_tensor* out);
  memra_status add_rms_norm(const memra_tensor* x, memra_tensor* residual, const memra_weight* w, float eps,
                            float unit_offset, memra_tensor* out);
  memra_status add(const memra_tensor* a, const memra_tensor* b, memra_tensor* out);
  memra_status matmul(const memra_tensor* x, const memra_weight* w, const memra_weight* bias,
                      memra_tensor* out);
  memra_status gated_activation(memra_activation act, const memra_tensor* gate, const memra_tensor* up,
                                memra_tensor* out);
  memra_status attention(const memra_attention_params* params, const memra_forward_batch* batch,
                         memra_tensor* q, memra_tensor* k, const memra_tensor* v, memra_tensor* out);
  memra_status gather_logit_rows(const memra_tensor* x, const memra_forward_batch* batch, memra_tensor* out);
  memra_status logits_output(const memra_tensor* logits, const memra_forward_batch* batch);
  memra_status rows_input(const memra_forward_batch* batch, memra_tensor* out);
  memra_status rows_output(const memra_tensor* x, const memra_forward_batch* batch);
  // Ops by name (cpu_named_ops.cpp: the CPU implementations of host/ops/op_registry.hpp).
  memra_status op_find(const char* name, uint32_t attrs_version, const memra_op** out);
  memra_status op_run(const memra_op* op, const memra_op_args* args);
  memra_status moe_ffn(const memra_op_args& args);  // cpu_moe_ffn.cpp
  memra_status moe_mlp(const float* xs, int64_t n, const memra_weight& wg, const memra_weight& wu, const memra_weight& wd,
                       int32_t activation, const std::vector<uint8_t>& kinds, std::vector<float>& down);

  memra_status fail(memra_status code, std::string message);

 private:
  KvCacheConfig kv_;
  QuantLookup quant_lookup_;
  // Layer after layer (KvCacheConfig::layer_offset): [num_blocks][block_size][kv_heads][head_dim]
  // elements of the layer's dtype, as bytes.
  std::vector<uint8_t> k_cache_;
  std::vector<uint8_t> v_cache_;
  RecurrentStateConfig state_;
  std::vector<std::vector<uint8_t>> state_cache_;  // per layer: [slots][layer_bytes[l]]
  std::deque<std::vector<float>> scratch_;
  // The step's row kinds (note_batch): prompt flag per token, the gathered logits rows.
  std::vector<uint8_t> prompt_flags_;
  std::vector<int32_t> logits_rows_;
  void note_batch(const memra_forward_batch* batch);
  std::vector<uint8_t> matmul_row_kinds(int64_t m) const;
  // y [m][w rows] = x [m][w cols] . W^T, row i on the prompt path where kinds[i] is 1
  // (kinds empty: every row generated); what matmul does once it knows its rows' kinds.
  memra_status matmul_rows(const float* x, int64_t m, const memra_weight* w, const std::vector<uint8_t>& kinds, float* y);
  memra_status matmul_prompt_rows_bf16(const QuantTable& qt, const memra_matmul_args& a, const std::vector<uint8_t>& kinds);
  std::string last_error_;
  memra_backend_ops ops_{};
  // Plugin ops (register_ops), their handles: addresses stay put.
  std::deque<ops::PluginOp> plugin_ops_;
  memra_status run_plugin_op(const ops::PluginOp& op, const memra_op_args* args);
};

}  // namespace memra::backend
