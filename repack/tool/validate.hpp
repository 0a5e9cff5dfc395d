// What a source must pass before a byte of its repack is written, so a checkpoint
// that cannot load is refused with nothing written or recorded, and the error names
// the user's files (not a repack's):
//   - the family's plan against the tensors: every tensor the plan binds (its
//     plan_describe "tensors": name and shape) is in the checkpoint with that shape;
//   - the tokenizer files (tokenizer.json, tokenizer_config.json) parse;
//   - every weight is finite (checked chunk by chunk while the tensors are written:
//     a NaN or Inf stops the repack, its temporary directory removed, nothing recorded).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "repack/tool/source.hpp"

namespace memra::repack {

// keep_as_stored (optional): the tensors the family's plan asks a quantizing repack to keep as
// stored (plan_describe's "keep_as_stored"), canonical name -> the family's reason.
Status validate_source(const Source& source, const plugins::PluginHost& plugins,
                       std::map<std::string, std::string>* keep_as_stored = nullptr);

// `values` are elements [first, first + count) of `t`; an error names the first NaN or Inf.
Status check_finite(const Source& source, const SourceTensor& t, const float* values, uint64_t first, uint64_t count);
// The same over the whole tensor, converted chunk by chunk (tensors copied as stored).
// Tensors of a scheme memra cannot convert (integers, some GGUF types) pass unchecked.
Status check_finite(const Source& source, const SourceTensor& t, const std::function<bool()>& stop = {});

// Every tensor of the source, on `threads` threads (0 = all cores): for a checkpoint
// served in place (memra-host --no-repack), which no repack checks.
Status check_all_finite(const Source& source, int threads = 0);

}  // namespace memra::repack
