// The CPU reference's ops by name: its implementations of host/ops/op_registry.hpp's
// entries (one row per op version; moe_ffn: cpu_moe_ffn.cpp), and the ops a family plugin
// brings, run through their CPU references.
#include <cstdint>
#include <iterator>
#include <string_view>
#include <vector>
#include <string>

#include "host/backend/cpu/cpu_backend.hpp"
#include "host/ops/op_registry.hpp"
#include "memra/ops.h"

namespace memra::backend {
namespace {

struct CpuOp {
  const ops::OpSpec* spec;
  memra_status (CpuBackend::*run)(const memra_op_args&);
};

const CpuOp kCpuOps[] = {
    {ops::find_op(MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2), &CpuBackend::moe_ffn},
};

const CpuOp* cpu_ops_begin() { return std::begin(kCpuOps); }
const CpuOp* cpu_ops_end() { return std::end(kCpuOps); }

}  // namespace

Status CpuBackend::register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>*) {
  for (const ops::PluginOp& op : ops) {
    bool known = false;
    for (const ops::PluginOp& p : plugin_ops_) known = known || p.def == op.def;
    if (!known) plugin_ops_.push_back(op);
  }
  return {};
}

memra_status CpuBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    for (const ops::PluginOp& op : plugin_ops_)
      if (op.def->version == attrs_version && std::string_view(op.def->name) == name) {
        *out = reinterpret_cast<const memra_op*>(&op);
        return MEMRA_OK;
      }
    std::string why;
    const memra_status st = ops::unregistered_op(name, attrs_version, &why, std::vector<ops::PluginOp>(plugin_ops_.begin(), plugin_ops_.end()));
    return fail(st, why);
  }
  for (const CpuOp* op = cpu_ops_begin(); op != cpu_ops_end(); ++op)
    if (op->spec == spec) {
      *out = reinterpret_cast<const memra_op*>(op);
      return MEMRA_OK;
    }
  return fail(MEMRA_ERR_UNSUPPORTED, "op_find: the CPU backend does not implement op '" + std::string(name) + "'");
}

memra_status CpuBackend::op_run(const memra_op* handle, const memra_op_args* args) {
  for (const ops::PluginOp& p : plugin_ops_)
    if (handle == reinterpret_cast<const memra_op*>(&p)) return run_plugin_op(p, args);
  const auto* op = reinterpret_cast<const CpuOp*>(handle);
  if (op < cpu_ops_begin() || op >= cpu_ops_end()) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of this backend");
  if (std::string why = ops::op_args_mismatch(*op->spec, args); !why.empty()) return fail(MEMRA_ERR_ABI_MISMATCH, why);
  return (this->*op->run)(*args);
}

// A plugin op's CPU reference, with the layer's state and the batch's host arrays.
memra_status CpuBackend::run_plugin_op(const ops::PluginOp& op, const memra_op_args* args) {
  memra_op_env env{};
  env.struct_size = MEMRA_OP_ENV_STRUCT_SIZE;
  env.backend = MEMRA_BACKEND_CPU;
  if (MEMRA_STRUCT_HAS(args, memra_op_args, batch) && args->batch) {
    const memra_forward_batch& b = *args->batch;
    env.positions = b.positions;
    env.seq_index = b.seq_index;
    env.seq_lens = b.seq_lens;
    env.state_slots = MEMRA_STRUCT_HAS(&b, memra_forward_batch, state_slots) ? b.state_slots : nullptr;
    env.snapshot_slots = MEMRA_STRUCT_HAS(&b, memra_forward_batch, snapshot_slots) ? b.snapshot_slots : nullptr;
  }
  const int64_t local = MEMRA_STRUCT_HAS(args, memra_op_args, batch) ? args->layer - kv_config().first_layer : -1;
  if (local >= 0 && static_cast<size_t>(local) < state_cache_.size() && state_.layer_bytes[static_cast<size_t>(local)] > 0) {
    env.state = state_cache_[static_cast<size_t>(local)].data();
    env.state_stride = state_.layer_bytes[static_cast<size_t>(local)];
    env.num_state_slots = static_cast<int32_t>(state_.slots);
  }
  env.scratch_ctx = this;
  env.scratch = [](const memra_op_env* e, uint64_t bytes, void** out) -> memra_status {
    if (!e || !out) return MEMRA_ERR_INVALID_ARGUMENT;
    auto* self = static_cast<CpuBackend*>(e->scratch_ctx);
    // 256-byte aligned inside a float buffer of 64 spare elements.
    self->scratch_.emplace_back(static_cast<size_t>((bytes + 3) / 4 + 64), 0.0f);
    const auto base = reinterpret_cast<uintptr_t>(self->scratch_.back().data());
    *out = reinterpret_cast<void*>((base + 255) & ~uintptr_t{255});
    return MEMRA_OK;
  };
  std::string why;
  const memra_status st = ops::run_plugin_op(op, op.def->run_cpu, env, args, &why);
  return st == MEMRA_OK ? st : fail(st, why);
}

}  // namespace memra::backend
