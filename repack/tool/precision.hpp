// Which scheme each tensor is written in, for a requested --quant, and why.
//
//   keep            every tensor as stored (GGUF blocks bit-exact, safetensors dtypes as
//                   is), except 1-D float tensors, widened exactly to f32.
//   bf16 | f16      matrices converted from their exact float32 values; 1-D -> f32.
//   q8_0 | q6_k | q5_k | q4_k | iq4_xs | q4_0 | fp8
//                   matrices quantized on the CPU with memra_quantize, with these
//                   exceptions (docs/FORMAT.md, "Precision choices"):
//                   - 1-D tensors (norms, biases): f32;
//                   - MoE router gates: kept as stored (tiny, and routing is brittle);
//                   - the output head (output.weight, or token_embd.weight when tied):
//                     q6_k for the 4/5-bit targets; kept as stored for fp8;
//                   - token_embd.weight (untied): kept as stored for fp8;
//                   - attn_v.weight: q6_k for the 4/5-bit targets;
//                   - rows that break the block size: q8_0 if 32 divides them, else kept;
//                   - a tensor already in its target scheme is carried as is.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "repack/format/manifest.hpp"
#include "repack/tool/source.hpp"

namespace memra::repack {

struct TensorPlan {
  size_t source_index = 0;
  std::string scheme;      // output scheme
  bool copy = true;        // bytes carried as stored; false = converted through float32
};

struct PrecisionPlan {
  std::vector<TensorPlan> tensors;  // one per source tensor, same order
  format::Precision precision;      // the rules, for the manifest
};

// "keep", "bf16", "f16", "q8_0", "q6_k", "q5_k", "q4_k", "iq4_xs", "q4_0", "fp8".
const std::vector<std::string>& quant_choices();

// Per-tensor overrides (--tensor-scheme PATTERN=SCHEME): a tensor whose canonical name
// matches the glob PATTERN (fnmatch) is written in SCHEME; the first match wins.
struct SchemeOverride {
  std::string pattern;
  std::string scheme;
};

// A scheme memra does not know itself but a quant plugin handles (--quant NAME): its
// plugin says whether a matrix of `shape` fits (weight_bytes); nullopt = it does not.
using PluginSchemeBytes = std::function<std::optional<uint64_t>(const std::string& scheme, const std::vector<uint64_t>& shape)>;

// `plugin_bytes` (may be empty): answers for schemes no built-in quantizer writes.
// `keep_as_stored`: matrices the family's plan keeps as stored under quantization (name ->
// the family's reason; validate_source), e.g. MoE routers.
Result<PrecisionPlan> plan_precision(const Source& source, const std::string& requested,
                                     const std::vector<SchemeOverride>& overrides = {},
                                     const PluginSchemeBytes& plugin_bytes = {},
                                     const std::map<std::string, std::string>& keep_as_stored = {});

// Schemes an override may name: f32, f16, bf16 and the quantizers' schemes.
bool overridable_scheme(const std::string& scheme);

}  // namespace memra::repack
