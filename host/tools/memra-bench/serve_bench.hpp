// memra-bench --concurrency: serving throughput through the real scheduler. N greedy
// requests (random prompts) are submitted at once; the figure is the aggregate decode
// rate while all N are decoding: tokens that arrived between the moment the last one
// got its first token and the moment the first one finished, over that window. With
// pipeline stages it is measured for each --pp-groups value (1: one step at a time;
// 2: rolling groups, Scheduler pipeline_groups), and every run's tokens must equal
// the first run's (greedy: the same requests give the same tokens).
#pragma once

#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/token_constraint.hpp"

namespace memra::bench {

struct ServeBenchOptions {
  std::vector<int> concurrency;   // e.g. {1, 8}
  std::vector<int> groups = {1};  // scheduler pipeline_groups values to measure
  int prompt = 64;                // prompt tokens per request
  int decode = 64;                // tokens generated per request
  int repeats = 3;                // median of N measured runs (after one warm-up)
  // Each request under a constraint (a grammar: --json-mask), ending at a stop id once it
  // is complete; `label` names it in the printed lines.
  engine::TokenConstraintFactory constraint;
  std::vector<int32_t> stop_ids;
  std::string label;
};

struct ServeFigure {
  int concurrency = 0, groups = 1;
  double tok_s = 0;  // aggregate decode rate (median)
};

// Prints one line per (concurrency, groups) and appends it to `figures` when given;
// returns 0, or 1 when a run fails or its tokens differ.
int run_serve_bench(engine::Engine& engine, const ServeBenchOptions& options, std::vector<ServeFigure>* figures = nullptr);

}  // namespace memra::bench
