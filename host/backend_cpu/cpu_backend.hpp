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

#include "memra/backend.h"
#include "memra/quant.h"

namespace memra::backend {

// Geometry of the paged KV cache (uniform across layers) and its element type:
// MEMRA_DTYPE_F32 or MEMRA_DTYPE_BF16 (K after RoPE and V rounded to bf16 when
// written; docs/ARCHITECTURE.md, "KV cache element type").
struct KvCacheConfig {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  int64_t num_blocks = 0;
  memra_dtype dtype = MEMRA_DTYPE_F32;
};

// Recurrent state (the plan's RECURRENT groups, docs/ARCHITECTURE.md "State manager"):
// `slots` rows per layer; layer_bytes[l] is what one slot of backend layer l takes
// (0: the layer keeps no recurrent state). Slots are the engine's to assign.
struct RecurrentStateConfig {
  int64_t slots = 0;
  std::vector<uint64_t> layer_bytes;
  uint64_t bytes() const {
    uint64_t n = 0;
    for (uint64_t b : layer_bytes) n += b * static_cast<uint64_t>(slots);
    return n;
  }
};

// Bytes of one KV element (4 or 2), or 0 for a dtype the KV cache does not support.
inline uint64_t kv_element_bytes(memra_dtype dtype) {
  return dtype == MEMRA_DTYPE_F32 ? 4u : dtype == MEMRA_DTYPE_BF16 ? 2u : 0u;
}

// A quant plugin's table and its context for this host.
struct QuantTable {
  const memra_quant_api* api = nullptr;
  memra_plugin_ctx* ctx = nullptr;
};
// Finds the quant plugin that owns a scheme ("bf16", "q4_k", ...); api NULL when none does.
using QuantLookup = std::function<QuantTable(const char* scheme)>;

class CpuBackend {
 public:
  CpuBackend(const KvCacheConfig& kv, QuantLookup quant_lookup, RecurrentStateConfig state = {});
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  const memra_backend_ops* ops() const { return &ops_; }
  const KvCacheConfig& kv_config() const { return kv_; }

  // Allocates the KV cache and the recurrent state, zeroed (separate from construction so a model can be bound and
  // validated before the large allocation happens). Refuses (MEMRA_ERR_UNSUPPORTED,
  // last_error() says why) a dtype other than F32 or BF16.
  memra_status allocate_kv();
  // Frees the previous step's scratch tensors; call before each model_forward.
  void begin_step();
  // The step's batch, for ops that take none (matmul: its prompt rows). embedding and
  // attention note it too; a pipeline stage that sees neither first calls this.
  void prepare_batch(const memra_forward_batch* batch);
  // Detail of the last failing op (empty when none).
  const std::string& last_error() const { return last_error_; }

  // Copies one KV block to another in every layer (prefix-cache copy-on-write).
  void copy_kv_block(int32_t from, int32_t to);
  // Recurrent state slots, every layer that keeps state: copy (fork, snapshot, restore)
  // and zero (a new sequence). INVALID_ARGUMENT for a slot out of range.
  memra_status copy_state_slot(int32_t from, int32_t to);
  memra_status reset_state_slot(int32_t slot);
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
  // Ops by name (cpu_named_ops.cpp: the CPU implementations of host/ops/op_registry.hpp).
  memra_status op_find(const char* name, uint32_t attrs_version, const memra_op** out);
  memra_status op_run(const memra_op* op, const memra_op_args* args);
  memra_status decay_scan(const memra_op_args& args);

  memra_status fail(memra_status code, std::string message);

 private:
  KvCacheConfig kv_;
  QuantLookup quant_lookup_;
  // [layers][num_blocks][block_size][kv_heads][head_dim] elements of kv_.dtype, as bytes.
  std::vector<uint8_t> k_cache_;
  std::vector<uint8_t> v_cache_;
  RecurrentStateConfig state_;
  std::vector<std::vector<uint8_t>> state_cache_;  // per layer: [slots][layer_bytes[l]]
  std::deque<std::vector<float>> scratch_;
  // The step's row kinds (prepare_batch): prompt flag per token, the gathered logits rows.
  std::vector<uint8_t> prompt_flags_;
  std::vector<int32_t> logits_rows_;
  std::vector<uint8_t> matmul_row_kinds(int64_t m) const;
  memra_status matmul_prompt_rows_f32(const QuantTable& qt, const memra_matmul_args& a, const std::vector<uint8_t>& kinds);
  std::string last_error_;
  memra_backend_ops ops_{};
};

}  // namespace memra::backend
