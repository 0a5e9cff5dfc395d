#include "host/ops/op_registry.hpp"

#include "memra/ops.h"

namespace memra::ops {
namespace {

// Append-only, like the ABI: an entry's meaning never changes; a new version is a new entry.
constexpr OpSpec kOps[] = {
    {MEMRA_OP_DECAY_SCAN, MEMRA_OP_DECAY_SCAN_V1, sizeof(memra_decay_scan_attrs_v1), kCpu | kCuda,
     "decayed running sum over a sequence, in RECURRENT state decay_scan.v1"},
    {MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V1, sizeof(memra_moe_ffn_attrs_v1), kCpu | kCuda,
     "mixture-of-experts MLP: softmax top-k routing over expert gate/up/down matrices"},
};

std::string_view backend_name(memra_backend_kind kind) { return kind == MEMRA_BACKEND_CUDA ? "cuda" : "cpu"; }

}  // namespace

std::span<const OpSpec> registered_ops() { return kOps; }

memra_status unregistered_op(std::string_view name, uint32_t version, std::string* why) {
  for (const OpSpec& s : kOps)
    if (s.name == name) {
      *why = "op_find: op '" + std::string(name) + "' has no version " + std::to_string(version);
      return MEMRA_ERR_UNSUPPORTED;
    }
  *why = "op_find: no op named '" + std::string(name) + "'";
  return MEMRA_ERR_NOT_FOUND;
}

std::string op_args_mismatch(const OpSpec& spec, const memra_op_args* args) {
  const std::string who = "op_run " + std::string(spec.name) + ": ";
  if (!MEMRA_STRUCT_HAS(args, memra_op_args, batch)) return who + "args struct too small";
  if (args->attrs_version != spec.version || !args->attrs || args->attrs_size < spec.attrs_size ||
      *static_cast<const size_t*>(args->attrs) < spec.attrs_size)
    return who + "attributes are not version " + std::to_string(spec.version) + " or too small";
  return "";
}

const OpSpec* find_op(std::string_view name, uint32_t version) {
  for (const OpSpec& op : kOps)
    if (op.name == name && op.version == version) return &op;
  return nullptr;
}

std::string check_required_ops(std::string_view plugin, std::span<const memra_op_requirement> ops,
                               memra_backend_kind kind) {
  const std::string who = "family plugin '" + std::string(plugin) + "'";
  for (size_t i = 0; i < ops.size(); ++i) {
    const memra_op_requirement& r = ops[i];
    if (!MEMRA_STRUCT_HAS(&r, memra_op_requirement, version) || !r.name)
      return who + " lists required op " + std::to_string(i) + " without a name or with a struct_size too small";
    const std::string op = "op '" + std::string(r.name) + "' v" + std::to_string(r.version);
    const OpSpec* spec = find_op(r.name, r.version);
    if (!spec) {
      std::string known;
      for (const OpSpec& s : kOps)
        if (s.name == r.name) known += (known.empty() ? "" : ", ") + std::string("v") + std::to_string(s.version);
      return who + " requires " + op + ", which this host does not have" +
             (known.empty() ? std::string(" (no op of that name)") : " (it has " + known + ")");
    }
    if ((spec->backends & (1u << kind)) == 0)
      return who + " requires " + op + ", which the " + std::string(backend_name(kind)) + " backend does not implement";
  }
  return {};
}

}  // namespace memra::ops
