// memra-bench --spec: batch-1 generation, plain vs speculative, on the same engine;
// prints both speeds, the speed-up, drafted / accepted / acceptance rate, and fails
// unless the speculative tokens equal plain decode's.
//
// Drafters:
//   ngram   prompt lookup. The workload is a prompt made of a --spec-pattern-token
//           unit repeated (0: random tokens, nothing to look up), or with MODEL the
//           first --prompt tokens of --prompt-file (real text).
//   draft   a draft model: --draft PATH (a checkpoint with MODEL's tokenizer), or for
//           the random-weight model the *same weights* requantized to --draft-quant
//           (q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs): a random model of another shape would agree
//           with the target only by chance, a quantized copy of its own weights
//           agrees as often as quantization lets it — like a real draft model.
//   oracle  (mechanism ceiling, not a drafter) proposes plain decode's own next
//           tokens, each right with probability --oracle-accept: the speed-up the
//           verify path allows at that acceptance, whatever the weights.
#pragma once

#include <memory>
#include <string>

#include "core/common/result.hpp"
#include "host/engine/engine.hpp"
#include "core/plugin_host/plugin_host.hpp"

namespace memra::bench {

struct SpecBenchOptions {
  std::string drafter = "ngram";  // ngram | draft | oracle
  int k = 4;
  int gen = 128;                  // tokens generated per run
  int prompt = 64;                // prompt tokens
  int pattern = 16;               // repeated unit of the prompt (0 = random prompt)
  std::string prompt_file;        // real text instead: its first `prompt` tokens (needs MODEL)
  int repeats = 3;                // best of N (the first run warms up too)
  bool fallback = false;          // the adaptive fallback (off: measure the drafter itself)
  double verify_cost = -1.0;      // the fallback's cost of one more verify token; < 0: measured
  std::string draft_quant = "q4_k";
  std::string draft_path;         // a real draft checkpoint (needs MODEL)
  double oracle_accept = 0.9;
};

// A copy of `target` with every bf16/f16/f32 matrix requantized to `scheme`
// (q8_0, q4_0, q4_k, q5_k, q6_k, iq4_xs); 1-D tensors are shared (target must outlive the copy).
Result<std::unique_ptr<engine::ModelSource>> requantized_copy(const engine::ModelSource& target, const std::string& scheme);

// Runs the benchmark; returns the process exit code. `eo` are the target's options
// (the draft engine gets the same backend).
int run_spec_bench(engine::Engine& target, const plugins::PluginHost& plugins, const engine::EngineOptions& eo,
                   const SpecBenchOptions& o);

}  // namespace memra::bench
