// The repack's test hook (docs/FORMAT.md, "Testing hooks"), read from MEMRA_REPACK_FAULT
// by memra-repack and by memra-host's first-load repack alike:
//   tensor:N            fail when the N-th tensor (1-based) starts being written
//   pause-tensor:N:MS   sleep MS milliseconds there instead (to stop the process midway);
//                       the sleep ends early once *cancel is set
//   manifest | rename   fail just before writing manifest.json / renaming into place
#pragma once

#include <atomic>
#include <functional>
#include <string_view>

#include "core/common/result.hpp"

namespace memra::repack {

// RepackOptions::fault for the variable's value; empty when it is unset.
std::function<Status(std::string_view)> fault_from_env(const std::atomic<bool>* cancel);

}  // namespace memra::repack
