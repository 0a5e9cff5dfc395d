// Which scheme each tensor is written in, for a requested --quant, and why. The schemes and
// their mixes come from the quant plugins (SchemeCatalog, memra_scheme_info):
//
//   keep            every tensor as stored (GGUF blocks bit-exact, safetensors dtypes as
//                   is), except 1-D float tensors, widened exactly to f32.
//   a float scheme  (block 1: f32, f16, bf16) matrices converted from their exact float32
//                   values; 1-D -> f32.
//   other targets   matrices quantized on the CPU by the scheme's quant plugin, with these
//                   exceptions (docs/FORMAT.md, "Precision choices"):
//                   - 1-D tensors (norms, biases): f32;
//                   - matrices the family keeps as stored (e.g. MoE routers);
//                   - the embedding-side matrices the target keeps as stored
//                     (memra_scheme_info.keep_as_stored: fp8 keeps the head and the token
//                     embeddings, a scheme without an embedding gather the embeddings);
//                   - the output head and attn_v.weight: the target's `sensitive` scheme
//                     (the 4/5-bit schemes name a 6-bit one, as llama.cpp's _M mixes);
//                   - rows a scheme cannot hold (its block size): its `fallback` scheme
//                     where that holds them, else kept as stored;
//                   - a tensor already in its target scheme is carried as is.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "repack/format/manifest.hpp"
#include "repack/tool/scheme_catalog.hpp"
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

// Per-tensor overrides (--tensor-scheme PATTERN=SCHEME): a tensor whose canonical name
// matches the glob PATTERN (fnmatch) is written in SCHEME; the first match wins.
struct SchemeOverride {
  std::string pattern;
  std::string scheme;
};

// `schemes`: the quant plugins' schemes (SchemeCatalog::from_plugins). `keep_as_stored`:
// matrices the family's plan keeps as stored under quantization (name -> the family's
// reason; validate_source), e.g. MoE routers.
Result<PrecisionPlan> plan_precision(const Source& source, const std::string& requested, const SchemeCatalog& schemes,
                                     const std::vector<SchemeOverride>& overrides = {},
                                     const std::map<std::string, std::string>& keep_as_stored = {});

}  // namespace memra::repack
