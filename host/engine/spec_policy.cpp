#include "host/engine/spec_policy.hpp"

namespace memra::engine {

void SpecGate::record(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  const double tokens = 1.0 + static_cast<double>(accepted);
  const double cost = 1.0 + static_cast<double>(drafted) * (policy_.verify_token_cost + draft_cost_);
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
