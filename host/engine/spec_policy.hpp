// Speculative decoding's automatic fallback: a per-sequence switch that turns
// speculation off while its measured acceptance makes it slower than plain
// decode, and tries it again now and then (texts change character mid-answer).
//
// Cost model, in units of one plain decode step of the target model: a verify
// step that feeds the pending token plus d drafts costs 1 + d * (verify_token_cost
// + draft_token_cost) and yields 1 + a tokens (a = drafts accepted). Batch-1
// decode on a GPU is memory bound, so an extra token in the same step costs a
// small fraction of a step (verify_token_cost, default 0.1); a draft model costs
// about its bytes read per token over the target's (DraftModelDrafter reports it).
// While the smoothed tokens-per-cost ratio stays below 1, plain decode is faster.
//
// Switching only decides how many tokens a step feeds; every token is still
// sampled from the target's logits at its (seed, position), so it never changes
// the output.
#pragma once

#include <cstdint>

namespace memra::engine {

struct SpecPolicy {
  bool adaptive = true;            // false: speculate on every step (benchmarks of the raw drafter, tests)
  double verify_token_cost = 0.1;  // cost of one more token in a verify step, in plain decode steps
  int64_t warmup_steps = 4;        // verify steps with drafts measured before the first judgement
  int64_t reprobe_after = 64;      // tokens decoded plainly before speculation is tried again
  double smoothing = 0.25;         // weight of the newest verify step in the running averages
};

class SpecGate {
 public:
  SpecGate() = default;
  SpecGate(const SpecPolicy& policy, double draft_token_cost) : policy_(policy), draft_cost_(draft_token_cost) {}

  bool active() const { return on_; }
  // A verify step that fed `drafted` drafts, `accepted` of which were kept.
  void record(int64_t drafted, int64_t accepted);
  // `tokens` decoded without speculation while the gate was off (counts toward the re-probe).
  void plain(int64_t tokens);
  // Estimated speed-up over plain decode (tokens per unit of cost); 1 before any measurement.
  double estimated_speedup() const;
  int64_t fallbacks() const { return fallbacks_; }  // times the gate turned itself off

 private:
  SpecPolicy policy_;
  double draft_cost_ = 0.0;
  bool on_ = true;
  int64_t steps_ = 0;         // verify steps measured since the gate (re)opened
  double tokens_ = 0.0;       // smoothed tokens per verify step
  double cost_ = 0.0;         // smoothed cost per verify step
  int64_t plain_tokens_ = 0;  // decoded plainly since the gate closed
  int64_t fallbacks_ = 0;
};

}  // namespace memra::engine
