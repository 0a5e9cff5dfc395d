// The host's one op registry: each op a forward pass may find by name (memra/ops.h),
// by (name, attribute version), with the backends that implement it. A backend's
// op_find answers from here and then from its own implementation table, so adding
// an op is an entry here plus an implementation in each backend that has one
// (docs/PLUGINS.md, "Adding an op"); the pipeline backend routes every named op by
// memra_op_args.layer and needs nothing per op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memra/backend.h"
#include "memra/family.h"
#include "memra/host_api.h"

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

std::span<const OpSpec> registered_ops();
// The entry for (name, version), or nullptr.
const OpSpec* find_op(std::string_view name, uint32_t version);
// A backend's op_find answer for a (name, version) not registered: MEMRA_ERR_UNSUPPORTED
// when the name is registered at another version, else MEMRA_ERR_NOT_FOUND; *why says which.
memra_status unregistered_op(std::string_view name, uint32_t version, std::string* why);
// A backend's op_run check of its arguments against the op's entry (the args struct, the
// attribute version, attrs_size and the attribute struct's own struct_size): "" when they
// fit, else why (MEMRA_ERR_ABI_MISMATCH).
std::string op_args_mismatch(const OpSpec& spec, const memra_op_args* args);
// Why a backend of `kind` cannot run a plan needing these ops ("" when it can), naming
// the plugin, the op and the backend in one line.
std::string check_required_ops(std::string_view plugin, std::span<const memra_op_requirement> ops,
                               memra_backend_kind kind);

}  // namespace memra::ops
