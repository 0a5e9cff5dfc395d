#include "host/ops/op_registry.hpp"

#include "memra/ops.h"

namespace memra::ops {
namespace {

// Append-only, like the ABI: an entry's meaning never changes; a new version is a new entry.
constexpr OpSpec kOps[] = {
    // (moe_ffn v1, over per-expert matrices, was replaced by v2 in ABI 2.11.)
    {MEMRA_OP_MOE_FFN, MEMRA_OP_MOE_FFN_V2, MEMRA_MOE_FFN_ATTRS_V2_STRUCT_SIZE, kCpu | kCuda,
     "mixture-of-experts MLP: softmax top-k routing over stacked expert gate/up/down tensors, optional gated shared expert"},
};

std::string_view backend_name(memra_backend_kind kind) { return kind == MEMRA_BACKEND_CUDA ? "cuda" : "cpu"; }

}  // namespace

std::span<const OpSpec> registered_ops() { return kOps; }

memra_status unregistered_op(std::string_view name, uint32_t version, std::string* why, std::span<const PluginOp> plugin_ops) {
  for (const PluginOp& p : plugin_ops)
    if (name == p.def->name) {
      *why = "op_find: op '" + std::string(name) + "' (plugin '" + p.plugin + "') has no version " + std::to_string(version);
      return MEMRA_ERR_UNSUPPORTED;
    }
  for (const OpSpec& s : kOps)
    if (s.name == name) {
      *why = "op_find: op '" + std::string(name) + "' has no version " + std::to_string(version);
      return MEMRA_ERR_UNSUPPORTED;
    }
  *why = "op_find: no op named '" + std::string(name) + "'";
  return MEMRA_ERR_NOT_FOUND;
}

std::string op_args_mismatch(const OpSpec& spec, const memra_op_args* args) {
  // Every op call of every step passes here: the message is built only for a refusal.
  auto who = [&] { return "op_run " + std::string(spec.name) + ": "; };
  if (!MEMRA_STRUCT_HAS(args, memra_op_args, batch)) return who() + "args struct too small";
  if (args->attrs_version != spec.version || !args->attrs || args->attrs_size < spec.attrs_size ||
      *static_cast<const size_t*>(args->attrs) < spec.attrs_size)
    return who() + "attributes are not version " + std::to_string(spec.version) + " or too small";
  return "";
}

const OpSpec* find_op(std::string_view name, uint32_t version) {
  for (const OpSpec& op : kOps)
    if (op.name == name && op.version == version) return &op;
  return nullptr;
}

const PluginOp* find_plugin_op(std::span<const PluginOp> plugin_ops, std::string_view name, uint32_t version) {
  for (const PluginOp& op : plugin_ops)
    if (op.def->version == version && name == op.def->name) return &op;
  return nullptr;
}

memra_status run_plugin_op(const PluginOp& op, memra_status (*run)(memra_plugin_ctx*, const memra_op_env*, const memra_op_args*),
                           const memra_op_env& env, const memra_op_args* args, std::string* why) {
  const OpSpec spec = op.spec();
  if (std::string e = op_args_mismatch(spec, args); !e.empty()) {
    *why = e;
    return MEMRA_ERR_ABI_MISMATCH;
  }
  auto who = [&] { return "op_run " + std::string(spec.name) + " (plugin '" + op.plugin + "')"; };
  if ((op.def->flags & MEMRA_OP_NEEDS_BATCH) &&
      (!args->batch || !MEMRA_STRUCT_HAS(args->batch, memra_forward_batch, state_slots))) {
    *why = who() + ": the op needs the batch (memra_op_args.batch)";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  if ((op.def->flags & MEMRA_OP_USES_STATE) && (!env.state || !args->batch->state_slots)) {
    *why = who() + ": layer " + std::to_string(args->layer) + " keeps no recurrent state on this backend";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  if (op.def->flags & MEMRA_OP_USES_STATE)
    for (int32_t s = 0; s < args->batch->num_seqs; ++s)
      if (args->batch->state_slots[s] < 0 || args->batch->state_slots[s] >= env.num_state_slots) {
        *why = who() + ": sequence " + std::to_string(s) + " has a bad state slot";
        return MEMRA_ERR_INVALID_ARGUMENT;
      }
  const int32_t* snaps = (op.def->flags & MEMRA_OP_USES_STATE) && MEMRA_STRUCT_HAS(args->batch, memra_forward_batch, snapshot_slots)
                             ? args->batch->snapshot_slots
                             : nullptr;
  if (snaps && !(op.def->flags & MEMRA_OP_SNAPSHOTS)) {
    *why = who() + ": the step asks for state snapshots at rows, which this op does not write (MEMRA_OP_SNAPSHOTS)";
    return MEMRA_ERR_INVALID_ARGUMENT;
  }
  if (snaps)
    for (int32_t t = 0; t < args->batch->num_tokens; ++t)
      if (snaps[t] < -1 || snaps[t] >= env.num_state_slots) {
        *why = who() + ": row " + std::to_string(t) + " has a bad snapshot slot";
        return MEMRA_ERR_INVALID_ARGUMENT;
      }
  memra_status st = MEMRA_ERR_INTERNAL;
  try {
    st = run(op.ctx, &env, args);
  } catch (...) {
    *why = who() + " threw a C++ exception; plugins must catch everything";
    return MEMRA_ERR_INTERNAL;
  }
  if (st != MEMRA_OK) *why = who() + " failed (" + memra_status_name(st) + ")";
  return st;
}

std::string check_required_ops(std::string_view plugin, std::span<const memra_op_requirement> ops,
                               memra_backend_kind kind, std::span<const PluginOp> plugin_ops) {
  const std::string who = "family plugin '" + std::string(plugin) + "'";
  for (size_t i = 0; i < ops.size(); ++i) {
    const memra_op_requirement& r = ops[i];
    if (!MEMRA_STRUCT_HAS(&r, memra_op_requirement, version) || !r.name)
      return who + " lists required op " + std::to_string(i) + " without a name or with a struct_size too small";
    const std::string op = "op '" + std::string(r.name) + "' v" + std::to_string(r.version);
    const OpSpec* spec = find_op(r.name, r.version);
    OpSpec brought;
    if (!spec)
      if (const PluginOp* p = find_plugin_op(plugin_ops, r.name, r.version)) {
        brought = p->spec();
        spec = &brought;
      }
    if (!spec) {
      std::string known;
      for (const OpSpec& s : kOps)
        if (s.name == r.name) known += (known.empty() ? "" : ", ") + std::string("v") + std::to_string(s.version);
      for (const PluginOp& p : plugin_ops)
        if (r.name == std::string_view(p.def->name)) known += (known.empty() ? "" : ", ") + std::string("v") + std::to_string(p.def->version);
      return who + " requires " + op + ", which this host does not have" +
             (known.empty() ? std::string(" (no op of that name)") : " (it has " + known + ")");
    }
    if ((spec->backends & (1u << kind)) == 0)
      return who + " requires " + op + ", which the " + std::string(backend_name(kind)) + " backend does not implement" +
             (spec == &brought ? " (the plugin gives it no CUDA form)" : "");
  }
  return {};
}

}  // namespace memra::ops
