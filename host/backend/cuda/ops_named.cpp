// The CUDA backend's ops by name (host/ops/op_registry.hpp entries it implements) and
// its recurrent state: one device buffer per layer that keeps state, [slots][bytes].
#include <iterator>
#include <string>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"
#include "host/backend/decay_scan_args.hpp"
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
    {ops::find_op(MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V1), &CudaBackend::moe_ffn},
};

}  // namespace

memra_status CudaBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    std::string why;
    const memra_status st = ops::unregistered_op(name, attrs_version, &why);
    return fail(st, why);
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
  if (std::string why = ops::op_args_mismatch(*op->spec, args); !why.empty()) return fail(MEMRA_ERR_ABI_MISMATCH, why);
  return (this->*op->run)(*args);
}

memra_status CudaBackend::decay_scan(const memra_op_args& a) {
  const int64_t local = a.layer - kv_.first_layer;  // this backend's layers start there
  if (std::string e = decay_scan_args_error(a, state_, local); !e.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, e);
  const auto& attrs = *static_cast<const memra_decay_scan_attrs_v1*>(a.attrs);
  const memra_forward_batch* batch = a.batch;
  const int64_t w = attrs.width;
  const memra_tensor* x = a.inputs[0];
  memra_tensor* y = a.outputs[0];
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
