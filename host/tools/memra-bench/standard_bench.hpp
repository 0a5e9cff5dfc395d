// The standard single-stream benchmark of memra-bench (issue #6 item 5): prefill
// throughput (pp), time to first token, decode throughput (tg) at one or more KV
// depths, peak device memory, and the decode roofline fraction against the
// device-to-device copy bandwidth measured in the same run. Medians of N runs after
// one warm-up run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/model_source.hpp"

namespace memra::bench {

struct StandardBenchOptions {
  int prompt_tokens = 512;        // pp / TTFT prompt length
  int gen_tokens = 128;           // tg: decode steps timed per depth
  std::vector<int> depths = {0};  // KV depth before the timed decode steps
  int repeats = 3;                // timed runs per figure (median), after one warm-up
  bool json = false;
  bool cuda = true;               // measure copy bandwidth and device memory
  std::string model_label, quant;
  uint64_t weight_bytes_per_token = 0;  // matrices read per token, input embedding excluded
  double fallback_gbps = 4300;    // roofline bandwidth when none can be measured (CPU)
  memra_dtype kv_dtype = MEMRA_DTYPE_F16;  // --kv-dtype: the KV bytes a token reads
};

// What run_standard_bench measured.
struct StandardFigures {
  double pp_tok_s = 0, ttft_ms = 0;
  struct Depth {
    int depth = 0;
    double tok_s = 0, ms_per_token = 0, bytes_per_token = 0, roofline = 0;
  };
  std::vector<Depth> tg;
  double copy_gbps = 0;
};

// Bytes a decode step reads: every matrix but the input embedding table, plus that table
// when the output shares it (tied embeddings: read in full every token).
struct WeightBytes {
  uint64_t matrices = 0, embedding = 0;
  bool tied = false;
  uint64_t per_token() const { return matrices + (tied ? embedding : 0); }
};
WeightBytes weight_bytes(const engine::ModelSource& source);

// The context the engine must allow for these options.
int64_t standard_bench_context(const StandardBenchOptions& o);

// Runs and prints the figures (and stores them in `figures` when given); returns the
// process exit code.
int run_standard_bench(engine::Engine& engine, const StandardBenchOptions& o, StandardFigures* figures = nullptr);

}  // namespace memra::bench
