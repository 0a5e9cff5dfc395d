// What a scheduler sequence produced, read to its end: the tests that compare
// scheduler outputs (plain, speculative, pipelined) drain handles the same way.
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

}  // namespace memra::engine::test_support
