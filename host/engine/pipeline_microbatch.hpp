// Micro-batches of one engine step for a pipeline: the step's sequences split into
// contiguous groups, each a memra_forward_batch of its own over the same token, KV
// and logits arrays (per-sequence and logits-row indices rebased). Issued one after
// another on a pipeline backend whose logits are deferred, stage 0 computes group B
// while stage 1 computes group A. Batch invariance makes the logits those of the
// whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "memra/family.h"

namespace memra::engine {

struct MicroBatch {
  memra_forward_batch batch{};
  std::vector<int32_t> seq_index;    // rebased to the group's first sequence
  std::vector<int32_t> logits_rows;  // rebased to the group's first token
};

// At most `parts` non-empty groups of whole sequences with about equal token counts,
// in order. Requires the engine's layout: each sequence's tokens contiguous and in
// sequence order, logits rows increasing. `vocab` sizes the logits rows.
std::vector<MicroBatch> split_microbatches(const memra_forward_batch& batch, int32_t parts, int64_t vocab);

}  // namespace memra::engine
