// memra-bench --batches: batched decode. For each batch size B, B sequences read a
// --prompt of random tokens in one step, then --decode steps of one token each are
// timed (median step, after two warm-up steps). A step is a decode step as the server
// runs it: greedy sampling where the backend samples (Engine::step_sampled: on CUDA no
// logits row leaves the device), each sequence fed its sampled token. The batch-1 roofline counts every
// matrix once plus each sequence's K and V up to its position.
#pragma once

#include <cstdint>
#include <vector>

#include "host/engine/engine.hpp"

namespace memra::bench {

struct BatchBenchOptions {
  std::vector<int> batches;    // e.g. {1, 4, 8, 16}
  int prompt = 64;             // prompt tokens per sequence
  int decode = 32;             // decode steps timed per batch size
  uint64_t matrix_bytes = 0;   // weights read per step (every matrix once)
  memra_dtype kv_dtype = MEMRA_DTYPE_F16;  // --kv-dtype: the KV bytes of the roofline
  double hbm_gbps = 4300;      // the roofline's bandwidth
};

struct BatchFigure {
  int batch = 0;
  double prefill_tok_s = 0, step_ms = 0, decode_tok_s = 0, roofline_tok_s = 0;
};

// Prints the table and appends each row to `figures` when given; returns the exit code.
int run_batch_bench(engine::Engine& engine, const BatchBenchOptions& o, std::vector<BatchFigure>* figures = nullptr);

}  // namespace memra::bench
