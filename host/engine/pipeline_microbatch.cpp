#include "host/engine/pipeline_microbatch.hpp"

#include <algorithm>

namespace memra::engine {

std::vector<MicroBatch> split_microbatches(const memra_forward_batch& b, int32_t parts, int64_t vocab) {
  const int32_t seqs = b.num_seqs;
  parts = std::clamp(parts, 1, std::max(1, seqs));
  // First token of each sequence (tokens are grouped by sequence, in order).
  std::vector<int32_t> first(static_cast<size_t>(seqs) + 1, b.num_tokens);
  for (int32_t t = b.num_tokens - 1; t >= 0; --t) first[static_cast<size_t>(b.seq_index[t])] = t;
  for (int32_t s = seqs - 1; s >= 0; --s) first[static_cast<size_t>(s)] = std::min(first[static_cast<size_t>(s)], first[static_cast<size_t>(s) + 1]);

  // Group g ends at the first sequence boundary reaching g+1 parts of the tokens,
  // leaving at least one sequence for each later group.
  std::vector<int32_t> bounds = {0};
  for (int32_t g = 1; g < parts; ++g) {
    const int64_t target = static_cast<int64_t>(b.num_tokens) * g / parts;
    int32_t s = bounds.back() + 1;
    while (s < seqs - (parts - g) && first[static_cast<size_t>(s)] < target) ++s;
    bounds.push_back(s);
  }
  bounds.push_back(seqs);

  std::vector<MicroBatch> out(bounds.size() - 1);
  int32_t logit = 0;
  for (size_t g = 0; g + 1 < bounds.size(); ++g) {
    const int32_t s0 = bounds[g], s1 = bounds[g + 1];
    const int32_t t0 = first[static_cast<size_t>(s0)], t1 = first[static_cast<size_t>(s1)];
    MicroBatch& m = out[g];
    for (int32_t t = t0; t < t1; ++t) m.seq_index.push_back(b.seq_index[t] - s0);
    const int32_t l0 = logit;
    while (logit < b.num_logits && b.logits_rows[logit] < t1) m.logits_rows.push_back(b.logits_rows[logit++] - t0);
    memra_forward_batch& x = m.batch;
    x = b;
    x.num_tokens = t1 - t0;
    x.token_ids = b.token_ids + t0;
    x.positions = b.positions + t0;
    x.seq_index = m.seq_index.data();
    x.num_seqs = s1 - s0;
    x.seq_lens = b.seq_lens + s0;
    x.block_tables = b.block_tables + static_cast<int64_t>(s0) * b.max_blocks_per_seq;
    x.num_logits = logit - l0;
    x.logits_rows = m.logits_rows.data();
    x.logits = b.logits + static_cast<int64_t>(l0) * vocab;
    x.prompt_tokens = b.prompt_tokens ? b.prompt_tokens + t0 : nullptr;
    x.state_slots = b.state_slots ? b.state_slots + s0 : nullptr;
  }
  return out;
}

}  // namespace memra::engine
