// Rotary position embedding, CPU reference, with the scalings Hugging Face
// transformers implements (default, linear, llama3, yarn).
#pragma once
#include <cstdint>
#include <vector>

#include "memra/backend.h"

namespace memra::ref {

// Per-pair inverse frequencies (rotary_dim / 2 of them) and the factor cos/sin are
// multiplied by (1 except for yarn), computed in float32 like transformers does.
struct RopeTable {
  std::vector<float> inv_freq;
  float attention_factor = 1.0f;
};

RopeTable rope_table(const memra_rope_params& params);

// Rotates `heads` vectors of `head_dim` floats at `x` (one token) for `position`.
// Only the first rotary_dim dims of each head rotate (partial rotary).
void rope_apply(const RopeTable& table, const memra_rope_params& params, int64_t position, float* x,
                int64_t heads, int64_t head_dim);

}  // namespace memra::ref
