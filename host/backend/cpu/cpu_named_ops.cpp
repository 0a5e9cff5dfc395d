// The CPU reference's ops by name: its implementations of host/ops/op_registry.hpp's
// entries (one row per op version), and decay_scan itself (moe_ffn: cpu_moe_ffn.cpp).
#include <iterator>
#include <string>

#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/decay_scan_args.hpp"
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
    {ops::find_op(MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V1), &CpuBackend::moe_ffn},
};

const CpuOp* cpu_ops_begin() { return std::begin(kCpuOps); }
const CpuOp* cpu_ops_end() { return std::end(kCpuOps); }

}  // namespace

memra_status CpuBackend::op_find(const char* name, uint32_t attrs_version, const memra_op** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_find: NULL argument");
  *out = nullptr;
  const ops::OpSpec* spec = ops::find_op(name, attrs_version);
  if (!spec) {
    std::string why;
    const memra_status st = ops::unregistered_op(name, attrs_version, &why);
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
  const auto* op = reinterpret_cast<const CpuOp*>(handle);
  if (op < cpu_ops_begin() || op >= cpu_ops_end()) return fail(MEMRA_ERR_INVALID_ARGUMENT, "op_run: not an op of this backend");
  if (std::string why = ops::op_args_mismatch(*op->spec, args); !why.empty()) return fail(MEMRA_ERR_ABI_MISMATCH, why);
  return (this->*op->run)(*args);
}

memra_status CpuBackend::decay_scan(const memra_op_args& a) {
  const int64_t local = a.layer - kv_config().first_layer;  // this backend's layers start there
  if (std::string e = decay_scan_args_error(a, state_, local); !e.empty()) return fail(MEMRA_ERR_INVALID_ARGUMENT, e);
  const auto& attrs = *static_cast<const memra_decay_scan_attrs_v1*>(a.attrs);
  const memra_forward_batch* batch = a.batch;
  const int64_t w = attrs.width;
  const memra_tensor* x = a.inputs[0];
  memra_tensor* y = a.outputs[0];
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
