// Host-side work plan of the prefill attention kernel (prefill_attention_mma.cu): the
// step's prompt rows grouped into warp tasks (16 positions 16k..16k+15 of one sequence
// x one q head) and CTAs (4 tasks of one sequence and one kv head), in the layout of
// prefill_attention_layout.hpp. Rows not flagged as prompt rows are listed apart (they
// run the decode kernel). Pure C++, no CUDA: unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/prefill_attention_layout.hpp"

namespace memra::attn {

struct PrefillPlan {
  std::vector<int32_t> tasks;      // ctas * kPrefillWarps * kPrefillTaskInts
  int32_t ctas = 0;
  std::vector<int32_t> generated;  // token rows that are not prompt rows, in step order
};

// Plans the rows t < num_tokens with prompt[t] != 0 (prompt == nullptr: none).
// Returns "" or what is wrong (a repeated (sequence, position), a negative position,
// heads not a multiple of kv_heads). CTAs are ordered longest first (their last
// position, descending) so the long rows start early; the order never changes a
// row's arithmetic.
std::string build_prefill_plan(int32_t num_tokens, const int32_t* positions, const int32_t* seq_index,
                               const uint8_t* prompt, int32_t heads, int32_t kv_heads, PrefillPlan& plan);

}  // namespace memra::attn
