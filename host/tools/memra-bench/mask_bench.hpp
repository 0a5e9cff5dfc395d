// memra-bench --json-mask: what a grammar mask costs a decode step. The same greedy
// streams through the scheduler twice — plain, then under response_format json_object
// (a host/structured grammar over the model's vocabulary, as memra-host builds it) —
// and the slowdown of the aggregate decode rate. Constrained rows are sampled on the
// host (docs/ARCHITECTURE.md "Sampling", step 0), so the figure includes the row's copy.
#pragma once

#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/text_model.hpp"

namespace memra::bench {

// Returns 0, or 1 when a run fails or its tokens differ between runs.
int run_mask_bench(engine::Engine& engine, const engine::TextModel& text, const std::vector<int>& concurrency, int prompt,
                   int decode, int repeats);

}  // namespace memra::bench
