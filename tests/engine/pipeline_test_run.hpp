// The run the pipeline tests (CPU and CUDA) compare between one backend and the
// stages: every prefill row of a prompt, then greedy decode rows fed back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"

namespace memra::pipeline_test {

// n token ids in [0, 1000], from `seed`.
inline std::vector<int32_t> test_prompt(size_t n, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, 1000);
  std::vector<int32_t> p;
  for (size_t i = 0; i < n; ++i) p.push_back(tok(rng));
  return p;
}

// Every prefill row, then `steps` greedy decode rows (each fed back); with `handoffs`,
// the pipeline's hand-off count after each decode step.
inline std::vector<std::vector<float>> prefill_and_decode(engine::Engine& e, const std::vector<int32_t>& prompt, int steps,
                                                          std::vector<int64_t>* handoffs = nullptr) {
  const int32_t seq = e.open_sequence();
  engine::StepRequest req{seq, prompt, true, true};
  auto out = e.step({&req, 1});
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out) return {};
  std::vector<std::vector<float>> rows = *out;
  for (int s = 0; s < steps; ++s) {
    const int32_t tok = engine::argmax(rows.back());
    engine::StepRequest d{seq, {&tok, 1}, false};
    auto o = e.step({&d, 1});
    EXPECT_TRUE(o.ok()) << (o.ok() ? "" : o.error().message);
    if (!o) break;
    rows.push_back((*o)[0]);
    if (handoffs) handoffs->push_back(e.backend().stats().handoffs);
  }
  e.close_sequence(seq);
  return rows;
}

}  // namespace memra::pipeline_test
