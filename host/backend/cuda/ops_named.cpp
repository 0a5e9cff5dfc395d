// The CUDA backend's ops by name (host/ops/op_registry.hpp entries it implements, and the
// ops a family plugin brings, run through their CUDA forms) and its recurrent state: one device buffer per layer that keeps state, [slots][bytes].
#include <iterator>
#include <string_view>
#include <vector>
#include <string>

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
    {ops::find_op(MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2), &CudaBackend::moe_ffn},
};

}  // namespace

memra_status CudaBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    for (const PluginOpEntry& e : plugin_ops_)
      if (e.op.def->version == attrs_version && std::string_view(e.op.def->name) == name) {
        if (!e.unavailable.empty()) return fail(MEMRA_ERR_UNSUPPORTED, "op_find: " + e.unavailable);
        *out = reinterpret_cast<const memra_op*>(&e);
        return MEMRA_OK;
      }
    std::vector<ops::PluginOp> known;
    for (const PluginOpEntry& e : plugin_ops_) known.push_back(e.op);
    std::string why;
    const memra_status st = ops::unregistered_op(name, attrs_version, &why, known);
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
  for (const PluginOpEntry& e : plugin_ops_)
    if (handle == reinterpret_cast<const memra_op*>(&e)) return run_plugin_op(e, args);
  const auto* op = reinterpret_cast<const CudaOp*>(handle);
  if (op < std::begin(kCudaOps) || op >= std::end(kCudaOps)) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of this backend");
  if (std::string why = ops::op_args_mismatch(*op->spec, args); !why.empty()) return fail(MEMRA_ERR_ABI_MISMATCH, why);
  return (this->*op->run)(*args);
}

memra_status CudaBackend::register_plugin_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) {
  memra_device_info device{};
  device.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  if (const memra_status st = device_info(&device); st != MEMRA_OK) return st;
  for (const ops::PluginOp& op : ops) {
    bool known = false;
    for (const PluginOpEntry& e : plugin_ops_) known = known || e.op.def == op.def;
    if (known) continue;
    PluginOpEntry e;
    e.op = op;
    const std::string who = "op '" + std::string(op.def->name) + "' v" + std::to_string(op.def->version) + " of plugin '" + op.plugin + "'";
    if (!op.def->run_cuda) {
      e.unavailable = who + " has no CUDA form (memra_op_def.run_cuda)";
    } else {
      last_error_.clear();
      memra_status st = MEMRA_ERR_INTERNAL;
      try {
        st = op.def->prepare_cuda(op.ctx, &device, &e.kernel_data);
      } catch (...) {
        st = MEMRA_ERR_INTERNAL;
      }
      if (st != MEMRA_OK)
        e.unavailable = who + ": prepare_cuda failed (" + memra_status_name(st) + ")" + (last_error_.empty() ? "" : ": " + last_error_);
    }
    if (!e.unavailable.empty() && refused) refused->push_back(e.unavailable + " on " + std::string(device.arch ? device.arch : "this GPU"));
    plugin_ops_.push_back(std::move(e));
  }
  return MEMRA_OK;
}

// A plugin op's CUDA form, with the layer's device state, the batch's device arrays and
// the step arena for scratch; its launches (host->kernel_launch) join the step's records.
memra_status CudaBackend::run_plugin_op(const PluginOpEntry& e, const memra_op_args* args) {
  memra_op_env env{};
  env.struct_size = MEMRA_OP_ENV_STRUCT_SIZE;
  env.backend = MEMRA_BACKEND_CUDA;
  env.stream = ctx_.stream();
  env.kernel_data = e.kernel_data;
  const bool has_batch = MEMRA_STRUCT_HAS(args, memra_op_args, batch) && args->batch &&
                         MEMRA_STRUCT_HAS(args->batch, memra_forward_batch, state_slots);
  if (has_batch) {
    const memra_forward_batch& b = *args->batch;
    auto db = device_batch(&b);
    if (!db) return fail(db.error());
    auto* d = const_cast<DeviceBatch*>(*db);  // this step's, the backend's own
    env.positions = reinterpret_cast<const int32_t*>(d->positions);
    env.seq_index = reinterpret_cast<const int32_t*>(d->seq_index);
    // Once per step, however many layers' ops read them.
    if (!d->seq_lens) {
      auto lens = upload_step_ints(b.seq_lens, static_cast<size_t>(b.num_seqs));
      if (!lens) return fail(lens.error());
      d->seq_lens = *lens;
    }
    env.seq_lens = reinterpret_cast<const int32_t*>(d->seq_lens);
    if (b.state_slots && !d->state_slots) {
      auto slots = upload_step_ints(b.state_slots, static_cast<size_t>(b.num_seqs));
      if (!slots) return fail(slots.error());
      d->state_slots = *slots;
    }
    env.state_slots = b.state_slots ? reinterpret_cast<const int32_t*>(d->state_slots) : nullptr;
    const int32_t* snaps = MEMRA_STRUCT_HAS(&b, memra_forward_batch, snapshot_slots) ? b.snapshot_slots : nullptr;
    if (snaps && !d->snapshot_slots) {
      auto rows = upload_step_ints(snaps, static_cast<size_t>(b.num_tokens));
      if (!rows) return fail(rows.error());
      d->snapshot_slots = *rows;
    }
    env.snapshot_slots = snaps ? reinterpret_cast<const int32_t*>(d->snapshot_slots) : nullptr;
  }
  const int64_t local = MEMRA_STRUCT_HAS(args, memra_op_args, batch) ? args->layer - kv_.first_layer : -1;
  if (local >= 0 && static_cast<size_t>(local) < state_cache_.size() && state_cache_[static_cast<size_t>(local)]) {
    env.state = reinterpret_cast<void*>(state_cache_[static_cast<size_t>(local)]);
    env.state_stride = state_.layer_bytes[static_cast<size_t>(local)];
    env.num_state_slots = static_cast<int32_t>(state_.slots);
  }
  env.scratch_ctx = this;
  env.scratch = [](const memra_op_env* en, uint64_t bytes, void** out) -> memra_status {
    if (!en || !out) return MEMRA_ERR_INVALID_ARGUMENT;
    auto* self = static_cast<CudaBackend*>(en->scratch_ctx);
    auto p = self->arena_->alloc(bytes);
    if (!p) return self->fail(MEMRA_ERR_OUT_OF_MEMORY, p.error().message);
    *out = reinterpret_cast<void*>(*p);
    return MEMRA_OK;
  };
  // Weights reach the op at their device addresses.
  memra_op_args a = *args;
  std::vector<memra_weight> dw;
  std::vector<const memra_weight*> dwp;
  if (MEMRA_STRUCT_HAS(args, memra_op_args, weights) && args->num_weights > 0 && args->weights) {
    dw.reserve(static_cast<size_t>(args->num_weights));
    for (int32_t i = 0; i < args->num_weights; ++i) {
      memra_status rs = MEMRA_OK;
      const CUdeviceptr d = resolve(args->weights[i], &rs);
      if (rs != MEMRA_OK) return rs;
      dw.push_back(*args->weights[i]);
      dw.back().data = reinterpret_cast<const void*>(d);
    }
    for (const memra_weight& w : dw) dwp.push_back(&w);
    a.weights = dwp.data();
  }
  last_error_.clear();
  std::string why;
  const memra_status st = ops::run_plugin_op(e.op, e.op.def->run_cuda, env, &a, &why);
  if (st != MEMRA_OK) return fail(st, why + (last_error_.empty() ? "" : ": " + last_error_));
  return after_op(e.op.def->name);
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
