#include "host/engine/spec_policy.hpp"

#include <algorithm>

namespace memra::engine {

void StepCostModel::observe(int64_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds > 0.0)) return;
  const double x = static_cast<double>(tokens);
  s0_ = kForget * s0_ + 1.0;
  s1_ = kForget * s1_ + x;
  s2_ = kForget * s2_ + x * x;
  sy_ = kForget * sy_ + seconds;
  sxy_ = kForget * sxy_ + x * seconds;
  ++n_;
  if (first_tokens_ < 0) first_tokens_ = tokens;
  else if (tokens != first_tokens_) varied_ = true;
}

double StepCostModel::token_cost(double fallback) const {
  if (n_ < 8 || !varied_) return fallback;
  const double det = s0_ * s2_ - s1_ * s1_;
  if (!(det > 1e-9 * s0_ * s2_)) return fallback;
  const double b = (s0_ * sxy_ - s1_ * sy_) / det;
  const double a = (sy_ - b * s1_) / s0_;
  if (!(a + b > 0.0)) return fallback;
  return std::clamp(b / (a + b), 0.0, 4.0);
}

double verify_token_cost(const SpecPolicy& policy, const StepCostModel& model) {
  return policy.verify_token_cost >= 0 ? policy.verify_token_cost : model.token_cost(kDefaultVerifyTokenCost);
}

void SpecGate::record(int64_t drafted, int64_t accepted, double token_cost) {
  if (drafted <= 0) return;
  const double tokens = 1.0 + static_cast<double>(accepted);
  const double cost = 1.0 + static_cast<double>(drafted) * (token_cost + draft_cost_);
  if (steps_ == 0) {
    tokens_ = tokens;
    cost_ = cost;
  } else {
    tokens_ += policy_.smoothing * (tokens - tokens_);
    cost_ += policy_.smoothing * (cost - cost_);
  }
  ++steps_;
  if (policy_.adaptive && steps_ >= policy_.warmup_steps && tokens_ < cost_) {
    on_ = false;
    plain_tokens_ = 0;
    ++fallbacks_;
  }
}

void SpecGate::plain(int64_t tokens) {
  if (on_) return;
  plain_tokens_ += tokens;
  if (plain_tokens_ >= policy_.reprobe_after) {
    on_ = true;  // measure afresh: the text may have turned repetitive
    steps_ = 0;
  }
}

double SpecGate::estimated_speedup() const { return steps_ == 0 || cost_ <= 0.0 ? 1.0 : tokens_ / cost_; }

}  // namespace memra::engine
