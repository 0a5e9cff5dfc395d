// The host's op registry: each op a forward pass may find by name (memra/ops.h), by
// (name, attribute version), with the backends that implement it. Two kinds: the
// host's own (a fixed table here, each backend implementing the ones it has) and the
// ops a family plugin brings (memra_plugin_api.ops, ABI 2.7: PluginOp), which every
// backend runs through the plugin's own CPU reference or CUDA form. A backend's op_find
// answers from both; the pipeline backend routes every named op by memra_op_args.layer
// and needs nothing per op (docs/PLUGINS.md, "Ops a plugin brings").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memra/backend.h"
#include "memra/family.h"
#include "memra/host_api.h"
#include "memra/ops.h"

namespace memra::ops {

// Backend bits of OpSpec::backends.
constexpr uint32_t kCpu = 1u << MEMRA_BACKEND_CPU;
constexpr uint32_t kCuda = 1u << MEMRA_BACKEND_CUDA;

struct OpSpec {
  std::string_view name;
  uint32_t version = 0;
  size_t attrs_size = 0;     // the version's attribute struct: attrs and attrs->struct_size must cover it
  uint32_t backends = 0;     // kCpu | kCuda: which backends implement it
  std::string_view summary;  // one line, for errors and docs
};

// An op a family plugin brings: its definition (checked when the plugin loaded) and the
// plugin's context, which its functions take first.
struct PluginOp {
  const memra_op_def* def = nullptr;
  memra_plugin_ctx* ctx = nullptr;
  std::string plugin;  // the plugin's name, for messages
  // Its registry entry: backends kCpu, and kCuda when it has a CUDA form.
  OpSpec spec() const {
    return {def->name, def->version, def->attrs_size, kCpu | (def->run_cuda ? kCuda : 0u), def->summary ? def->summary : ""};
  }
};

// The host's own ops.
std::span<const OpSpec> registered_ops();
// The entry for (name, version), or nullptr.
const OpSpec* find_op(std::string_view name, uint32_t version);
// A backend's op_find answer for a (name, version) not registered: MEMRA_ERR_UNSUPPORTED
// when the name is registered at another version, else MEMRA_ERR_NOT_FOUND; *why says which.
// `plugin_ops`: the plugin ops the backend has, also named when one has the name.
memra_status unregistered_op(std::string_view name, uint32_t version, std::string* why,
                             std::span<const PluginOp> plugin_ops = {});
// A backend's op_run check of its arguments against the op's entry (the args struct, the
// attribute version, attrs_size and the attribute struct's own struct_size): "" when they
// fit, else why (MEMRA_ERR_ABI_MISMATCH).
std::string op_args_mismatch(const OpSpec& spec, const memra_op_args* args);
// Why a backend of `kind` cannot run a plan needing these ops ("" when it can), naming
// the plugin, the op and the backend in one line.
// `plugin_ops`: the ops the plan's family plugin brings.
std::string check_required_ops(std::string_view plugin, std::span<const memra_op_requirement> ops,
                               memra_backend_kind kind, std::span<const PluginOp> plugin_ops = {});
// The plugin op (name, version) among `plugin_ops`, or nullptr.
const PluginOp* find_plugin_op(std::span<const PluginOp> plugin_ops, std::string_view name, uint32_t version);
// A backend's op_run call of a plugin op: checks the arguments against its definition
// (op_args_mismatch, the batch when it needs one), then runs `run` with `env`; a failing
// status or an exception in the plugin becomes `why` (one line naming plugin and op).
memra_status run_plugin_op(const PluginOp& op, memra_status (*run)(memra_plugin_ctx*, const memra_op_env*, const memra_op_args*),
                           const memra_op_env& env, const memra_op_args* args, std::string* why);

}  // namespace memra::ops
