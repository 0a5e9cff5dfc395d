// Records a finished repack in the registry: the source checkpoint (path, format,
// sha256, size, family, architecture, quant, parameters) and the repack run (output
// path and manifest sha256, tool version, options). Called only once the output is
// complete and renamed into place.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/common/result.hpp"
#include "repack/tool/repack.hpp"

namespace memra::repack {

struct ProvenanceIds {
  int64_t checkpoint_id = 0;
  int64_t repack_id = 0;
};

Result<ProvenanceIds> record_provenance(const std::filesystem::path& registry_path, const RepackResult& result,
                                        const RepackOptions& options);

// The options a repack ran with, as the JSON object stored in repacks.options.
std::string options_json(const RepackOptions& options);

}  // namespace memra::repack
