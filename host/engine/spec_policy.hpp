// Speculative decoding's automatic fallback: a per-sequence switch that turns
// speculation off while its measured acceptance makes it slower than plain
// decode, and tries it again now and then (texts change character mid-answer).
//
// Cost model, in units of one plain decode step of the target model: a verify
// step that feeds the pending token plus d drafts costs 1 + d * (verify_token_cost
// + draft_token_cost) and yields 1 + a tokens (a = drafts accepted). The cost of one
// more token in a step is measured (StepCostModel: a line fitted to the wall time of
// recent decode steps against their token count) unless verify_token_cost fixes it;
// until enough steps are seen, kDefaultVerifyTokenCost. A draft model costs about its
// bytes read per token over the target's (DraftModelDrafter reports it). While the
// smoothed tokens-per-cost ratio stays below 1, plain decode is faster.
//
// Switching only decides how many tokens a step feeds; every token is still
// sampled from the target's logits at its (seed, position), so it never changes
// the output.
#pragma once

#include <cstdint>

namespace memra::engine {

inline constexpr double kDefaultVerifyTokenCost = 0.1;

struct SpecPolicy {
  bool adaptive = true;             // false: speculate on every step (benchmarks of the raw drafter, tests)
  double verify_token_cost = -1.0;  // cost of one more token in a verify step, in plain decode steps; < 0: measured
  int64_t warmup_steps = 4;        // verify steps with drafts measured before the first judgement
  int64_t reprobe_after = 64;      // tokens decoded plainly before speculation is tried again
  double smoothing = 0.25;         // weight of the newest verify step in the running averages
};

// Wall time of decode steps against the tokens they computed, t = a + b * tokens,
// fitted by least squares with exponential forgetting (recent steps count more). The
// cost of one more token relative to a one-token step is b / (a + b).
class StepCostModel {
 public:
  void observe(int64_t tokens, double seconds);
  // The measured cost of one more token, or `fallback` until the fit is meaningful
  // (at least 8 steps of at least two different sizes); clamped to [0, 4].
  double token_cost(double fallback) const;
  int64_t observations() const { return n_; }

 private:
  static constexpr double kForget = 0.98;
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;
  int64_t n_ = 0;
  int64_t first_tokens_ = -1;
  bool varied_ = false;
};

// The cost a gate uses: the policy's fixed value when it sets one, else the model's.
double verify_token_cost(const SpecPolicy& policy, const StepCostModel& model);

class SpecGate {
 public:
  SpecGate() = default;
  SpecGate(const SpecPolicy& policy, double draft_token_cost) : policy_(policy), draft_cost_(draft_token_cost) {}

  bool active() const { return on_; }
  // A verify step that fed `drafted` drafts, `accepted` of which were kept; one more
  // token in it cost `token_cost` plain steps (the policy's value, or the measured one).
  void record(int64_t drafted, int64_t accepted, double token_cost);
  void record(int64_t drafted, int64_t accepted) {
    record(drafted, accepted, policy_.verify_token_cost >= 0 ? policy_.verify_token_cost : kDefaultVerifyTokenCost);
  }
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
