// What a scheduler sequence produced, read to its end: the tests that compare
// scheduler outputs (plain, speculative, pipelined) drain handles the same way; and the
// varied requests they submit.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "host/engine/scheduler.hpp"

namespace memra::engine::test_support {

struct DrainedSequence {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  FinishReason finish = FinishReason::none;
  int64_t cached = 0, drafted = 0, accepted = 0;
  // The output itself (the counters differ between plain and speculative runs).
  bool operator==(const DrainedSequence& o) const { return tokens == o.tokens && logprobs == o.logprobs; }
};

inline DrainedSequence drain(SequenceHandle& h) {
  DrainedSequence o;
  SequenceUpdate u;
  while (true) {
    h.wait(u, std::chrono::milliseconds(1000));
    for (const auto& t : u.tokens) {
      o.tokens.push_back(t.token);
      o.logprobs.push_back(t.logprob);
    }
    if (u.finish != FinishReason::none) break;
  }
  o.finish = u.finish;
  o.cached = u.cached_tokens;
  o.drafted = u.drafted_tokens;
  o.accepted = u.accepted_tokens;
  return o;
}

// Request `variant` of a family of distinct prompts (20 + 3 variant tokens), 12 tokens
// with logprobs, greedy or seeded sampling; no prefix caching.
inline SequenceRequest varied_request(int variant, bool sampled) {
  SequenceRequest r;
  for (int i = 0; i < 20 + variant * 3; ++i) r.prompt.push_back((i * 37 + variant * 101) % 1000 + 5);
  r.max_tokens = 12;
  r.sampling.temperature = sampled ? 0.9f : 0.0f;
  r.sampling.seed = 1234 + static_cast<uint64_t>(variant);
  r.sampling.logprobs = true;
  return r;
}

}  // namespace memra::engine::test_support
