// memra-registry prune: removes registry rows and repack directories that no longer
// match (docs/REGISTRY.md, "Pruning"). Directories are only ever removed inside the
// repack cache ($MEMRA_HOME/repacks); a repack a user wrote elsewhere loses its row only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "registry/registry.hpp"

namespace memra::registry::cli {

struct PruneOptions {
  std::filesystem::path repacks_dir;  // the first-load repack cache
  bool dry_run = false;               // report only
  bool verify = false;                // also check every tensor's CRC-32C
};

struct PruneReport {
  std::vector<std::string> lines;     // one per action, "removed ..." (or "would remove ...")
  std::size_t repack_rows = 0, checkpoint_rows = 0, directories = 0;
  std::uint64_t bytes = 0;            // of the directories removed
};

// Repack rows whose output is gone, is not the recorded one (manifest sha256), does not
// validate (with verify: a tensor fails its CRC-32C), or whose source changed (a file's
// size, or modified after the repack); checkpoint rows left without repacks; and in
// the cache, temporary directories of killed repacks and .memra directories no row names.
Result<PruneReport> prune(Registry& registry, const PruneOptions& options);

}  // namespace memra::registry::cli
