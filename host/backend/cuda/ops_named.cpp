// The CUDA backend's ops by name (host/ops/op_registry.hpp entries it implements) and
// its recurrent state: one device buffer per layer that keeps state, [slots][bytes].
#include <iterator>
#include <string>

#include "core/common/tensor_shape.hpp"
#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"
#include "host/ops/op_registry.hpp"
#include "memra/ops.h"

namespace memra::backend::cuda {
namespace {

struct CudaOp {
  const ops::OpSpec* spec;
  memra_status (CudaBackend::*run)(const memra_op_args&);
};

const CudaOp kCudaOps[] = {
    {ops::find_op(MEMRA_OP_DECAY_SCAN, MEMRA_OP_DECAY_SCAN_V1), &CudaBackend::decay_scan},
};

}  // namespace

memra_status CudaBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    for (const ops::OpSpec& s : ops::registered_ops())
      if (s.name == name)
        return fail(MEMRA_ERR_UNSUPPORTED, "op_find: op '" + std::string(name) + "' has no version " + std::to_string(attrs_version));
    return fail(MEMRA_ERR_NOT_FOUND, "op_find: no op named '" + std::string(name) + "'");
  }
  for (const CudaOp& op : kCudaOps)
    if (op.spec == spec) {
      *out = reinterpret_cast<const memra_op*>(&op);
      return MEMRA_OK;
    }
  return fail(MEMRA_ERR_UNSUPPORTED, "op_find: the CUDA backend does not implement op '" + std::string(name) + "'");
}

memra_status CudaBackend::op_run(const memra_op* handle, const memra_op_args* args) {
  const auto* op = reinterpret_cast<const CudaOp*>(handle);
  if (op < std::begin(kCudaOps) || op >= std::end(kCudaOps)) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of this backend");
  const ops::OpSpec& spec = *op->spec;
  const std::string who = "op_run " + std::string(spec.name) + ": ";
  if (!MEMRA_STRUCT_HAS(args, memra_op_args, batch)) return fail(MEMRA_ERR_ABI_MISMATCH, who + "args struct too small");
  if (args->attrs_version != spec.version || !args->attrs || args->attrs_size < spec.attrs_size ||
      *static_cast<const size_t*>(args->attrs) < spec.attrs_size)
    return fail(MEMRA_ERR_ABI_MISMATCH, who + "attributes are not version " + std::to_string(spec.version) + " or too small");
  return (this->*op->run)(*args);
}

memra_status CudaBackend::decay_scan(const memra_op_args& a) {
  const auto& attrs = *static_cast<const memra_decay_scan_attrs_v1*>(a.attrs);
  const memra_forward_batch* batch = a.batch;
  if (a.num_inputs != 1 || a.num_outputs != 1 || !a.inputs || !a.outputs || !a.inputs[0] || !a.outputs[0] || !batch)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: takes one input, one output and the batch");
  if (!MEMRA_STRUCT_HAS(batch, memra_forward_batch, state_slots) || !batch->state_slots)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: the batch carries no state slots");
  const memra_tensor* x = a.inputs[0];
  memra_tensor* y = a.outputs[0];
  const int64_t w = attrs.width;
  if (w <= 0 || tensor_last_dim(x) != w || tensor_last_dim(y) != w || tensor_numel(x) != w * batch->num_tokens ||
      tensor_numel(y) != tensor_numel(x))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: x and y must be [tokens][width]");
  const int64_t local = a.layer - kv_.first_layer;  // this backend's layers start there
  if (local < 0 || static_cast<size_t>(local) >= state_.layer_bytes.size() ||
      state_.layer_bytes[static_cast<size_t>(local)] != static_cast<uint64_t>(w) * sizeof(float))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: layer " + std::to_string(a.layer) +
                                                " keeps no recurrent state of width " + std::to_string(w));
  for (int32_t s = 0; s < batch->num_seqs; ++s)
    if (batch->state_slots[s] < 0 || batch->state_slots[s] >= state_.slots)
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: sequence " + std::to_string(s) + " has a bad state slot");
  auto b = device_batch(batch);
  if (!b) return fail(b.error());
  auto slots = upload_step_ints(batch->state_slots, static_cast<size_t>(batch->num_seqs));
  if (!slots) return fail(slots.error());
  const CUdeviceptr xs = reinterpret_cast<CUdeviceptr>(x->data), ys = reinterpret_cast<CUdeviceptr>(y->data);
  const CUdeviceptr state = state_cache_[static_cast<size_t>(local)];
  const int32_t tokens = batch->num_tokens, width = static_cast<int32_t>(w);
  return launch("recurrent", "memra_decay_scan", static_cast<unsigned>((w + 127) / 128), 1, 128, 0, xs, ys, tokens, width,
                attrs.decay, (*b)->seq_index, *slots, state);
}

memra_status CudaBackend::allocate_state(const RecurrentStateConfig& state) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  for (CUdeviceptr p : state_cache_)
    if (p) cuMemFree(p);
  state_cache_.assign(state.layer_bytes.size(), 0);
  state_ = state;
  for (size_t l = 0; l < state.layer_bytes.size(); ++l) {
    const uint64_t bytes = state.layer_bytes[l] * static_cast<uint64_t>(state.slots);
    if (!bytes) continue;
    if (const CUresult r = cuMemAlloc(&state_cache_[l], bytes); r != CUDA_SUCCESS)
      return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "cuMemAlloc (recurrent state)"));
    cuMemsetD8Async(state_cache_[l], 0, bytes, ctx_.stream());
  }
  return synchronize();
}

memra_status CudaBackend::copy_state_slot(int32_t from, int32_t to) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  if (from < 0 || to < 0 || from >= state_.slots || to >= state_.slots)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "copy_state_slot: slot out of range");
  for (size_t l = 0; l < state_cache_.size(); ++l) {
    const uint64_t b = state_.layer_bytes[l];
    if (!b || from == to) continue;
    if (const CUresult r = cuMemcpyDtoDAsync(state_cache_[l] + b * static_cast<uint64_t>(to), state_cache_[l] + b * static_cast<uint64_t>(from), b,
                                             ctx_.stream());
        r != CUDA_SUCCESS)
      return fail(MEMRA_ERR_DEVICE, cu_error(r, "copy_state_slot"));
  }
  return MEMRA_OK;
}

memra_status CudaBackend::reset_state_slot(int32_t slot) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  if (slot < 0 || slot >= state_.slots) return fail(MEMRA_ERR_INVALID_ARGUMENT, "reset_state_slot: slot out of range");
  for (size_t l = 0; l < state_cache_.size(); ++l)
    if (const uint64_t b = state_.layer_bytes[l])
      if (const CUresult r = cuMemsetD8Async(state_cache_[l] + b * static_cast<uint64_t>(slot), 0, b, ctx_.stream()); r != CUDA_SUCCESS)
        return fail(MEMRA_ERR_DEVICE, cu_error(r, "reset_state_slot"));
  return MEMRA_OK;
}

}  // namespace memra::backend::cuda
