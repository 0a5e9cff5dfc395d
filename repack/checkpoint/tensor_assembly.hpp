// A checkpoint's tensors under their canonical names, with the family's tensor parts
// (memra/family.h tensor_parts, ABI 2.11) assembled: tensors a family stacks (Hugging Face's
// per-expert matrices into one [experts][rows][cols] tensor) or splits (a fused gate_up into
// gate and up) become one canonical tensor made of byte segments of the stored ones, whole
// rows each. A tensor the family names directly is one segment (read in place); the engine
// copies a tensor of several segments into memory of its own, memra-repack streams them.
// Knows no tensor names: what goes where is the family's answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "repack/checkpoint/checkpoint_family.hpp"

namespace memra {

// A stored tensor as its reader sees it.
struct StoredTensor {
  std::string name;             // as the checkpoint spells it
  std::vector<uint64_t> shape;  // outermost first
  std::string scheme;           // lower-case: bf16, f32, a ggml type, ...
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

struct TensorSegment {
  size_t source = 0;  // index into the stored tensors
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
};

struct AssembledTensor {
  std::string name;        // canonical, or the stored name when the family reads none (`known` false)
  bool known = true;
  std::vector<uint64_t> shape;
  std::string scheme;
  uint64_t bytes = 0;
  std::vector<TensorSegment> segments;  // in order; one whole stored tensor when not assembled
  std::vector<size_t> sources;          // the stored tensors it comes from (first: the one it is named after)
};

// Every stored tensor's canonical form: named ones one to one (in the checkpoint's order),
// then each assembled tensor once (at the place of its first part). `keep_unknown`: a tensor
// the family does not read stays under its stored name (memra-repack) instead of being dropped.
// Refuses, naming the tensor, parts that do not tile their canonical tensor.
Result<std::vector<AssembledTensor>> assemble_tensors(const CheckpointFamily& family, const std::vector<StoredTensor>& stored,
                                                      bool keep_unknown);

}  // namespace memra
