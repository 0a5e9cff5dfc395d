// The CPU reference's ops by name: its implementations of host/ops/op_registry.hpp's
// entries (one row per op version), and decay_scan itself.
#include <iterator>
#include <string>

#include "core/common/tensor_shape.hpp"
#include "host/backend/cpu/cpu_backend.hpp"
#include "host/ops/op_registry.hpp"
#include "kernels/recurrent/decay_scan_ref.hpp"
#include "memra/ops.h"

namespace memra::backend {
namespace {

struct CpuOp {
  const ops::OpSpec* spec;
  memra_status (CpuBackend::*run)(const memra_op_args&);
};

const CpuOp kCpuOps[] = {
    {ops::find_op(MEMRA_OP_DECAY_SCAN, MEMRA_OP_DECAY_SCAN_V1), &CpuBackend::decay_scan},
};

const CpuOp* cpu_ops_begin() { return std::begin(kCpuOps); }
const CpuOp* cpu_ops_end() { return std::end(kCpuOps); }

}  // namespace

memra_status CpuBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    for (const ops::OpSpec& s : ops::registered_ops())
      if (s.name == name)
        return fail(MEMRA_ERR_UNSUPPORTED, "op_find: op '" + std::string(name) + "' has no version " + std::to_string(attrs_version));
    return fail(MEMRA_ERR_NOT_FOUND, "op_find: no op named '" + std::string(name) + "'");
  }
  for (const CpuOp* op = cpu_ops_begin(); op != cpu_ops_end(); ++op)
    if (op->spec == spec) {
      *out = reinterpret_cast<const memra_op*>(op);
      return MEMRA_OK;
    }
  return fail(MEMRA_ERR_UNSUPPORTED, "op_find: the CPU backend does not implement op '" + std::string(name) + "'");
}

memra_status CpuBackend::op_run(const memra_op* handle, const memra_op_args* args) {
  const auto* op = reinterpret_cast<const CpuOp*>(handle);
  if (op < cpu_ops_begin() || op >= cpu_ops_end()) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of this backend");
  const ops::OpSpec& spec = *op->spec;
  const std::string who = "op_run " + std::string(spec.name) + ": ";
  if (!MEMRA_STRUCT_HAS(args, memra_op_args, batch)) return fail(MEMRA_ERR_ABI_MISMATCH, who + "args struct too small");
  // The attribute struct's own struct_size must cover the version's fields.
  if (args->attrs_version != spec.version || !args->attrs || args->attrs_size < spec.attrs_size ||
      *static_cast<const size_t*>(args->attrs) < spec.attrs_size)
    return fail(MEMRA_ERR_ABI_MISMATCH, who + "attributes are not version " + std::to_string(spec.version) + " or too small");
  return (this->*op->run)(*args);
}

memra_status CpuBackend::decay_scan(const memra_op_args& a) {
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
  const int64_t local = a.layer - kv_config().first_layer;  // this backend's layers start there
  if (local < 0 || static_cast<size_t>(local) >= state_.layer_bytes.size() ||
      state_.layer_bytes[static_cast<size_t>(local)] != static_cast<uint64_t>(w) * sizeof(float))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: layer " + std::to_string(a.layer) +
                                                " keeps no recurrent state of width " + std::to_string(w));
  const auto* xs = static_cast<const float*>(x->data);
  auto* ys = static_cast<float*>(y->data);
  // Rows in batch order: a sequence's rows are in position order, each sees the previous.
  for (int32_t t = 0; t < batch->num_tokens; ++t) {
    const int32_t s = batch->seq_index[t];
    auto* state = reinterpret_cast<float*>(state_block(static_cast<int32_t>(local), batch->state_slots[s]));
    if (!state) return fail(MEMRA_ERR_INVALID_ARGUMENT, "decay_scan: sequence " + std::to_string(s) + " has a bad state slot");
    ref::decay_scan_row(attrs.decay, xs + t * w, w, state, ys + t * w);
  }
  return MEMRA_OK;
}

}  // namespace memra::backend
