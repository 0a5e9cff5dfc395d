// The speculative-decoding identity gates of tests/engine/speculative_scheduler_test.cpp
// (one suite over the CPU and CUDA backends): the serving scheduler's output with
// speculation equals its output without, token for token and logprob for logprob,
// for K = 1..8, greedy and seeded sampling, each sequence alone and batched with
// others (chunked prefill in the same steps), for the n-gram and the draft-model
// drafters. The reference is the plain scheduler with one sequence at a time.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "host/engine/draft_loader.hpp"
#include "host/engine/draft_model.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/scheduler.hpp"
#include "tests/engine/sequence_drain.hpp"

namespace memra::spec_gates {

namespace fs = std::filesystem;
using namespace memra::engine;

using Outcome = memra::engine::test_support::DrainedSequence;
using memra::engine::test_support::drain;

// Prompts built from the fixture's reference prompt: a repeated stretch (prompt
// lookup has something to find) and per-variant differences.
inline std::vector<SequenceRequest> requests(const std::vector<int32_t>& base, bool sampled, int count, int64_t max_tokens) {
  std::vector<SequenceRequest> out;
  for (int v = 0; v < count; ++v) {
    SequenceRequest r;
    r.prompt.assign(base.begin() + v, base.end());
    r.prompt.insert(r.prompt.end(), base.begin(), base.begin() + 8 + v);
    r.max_tokens = max_tokens - v;
    r.sampling.temperature = 0.0f;
    if (sampled) {
      // Sharp enough that the random model still repeats itself, so drafts get accepted.
      r.sampling.temperature = 0.5f;
      r.sampling.top_k = 2;
      r.sampling.top_p = 0.95f;
    }
    r.sampling.seed = 77 + static_cast<uint64_t>(v);
    r.sampling.logprobs = true;
    r.cache_namespace = "spec-gate";  // later runs on the same engine hit the prefix cache
    out.push_back(std::move(r));
  }
  return out;
}

struct RunResult {
  std::vector<Outcome> outcomes;
  SchedulerStats stats;
};

// Runs `reqs` through a fresh scheduler: all at once (together) or one at a time.
inline RunResult run(Engine& e, const SchedulerOptions& o, const std::vector<SequenceRequest>& reqs, bool together) {
  RunResult r;
  Scheduler s(e, o);
  if (together) {
    std::vector<std::shared_ptr<SequenceHandle>> hs;
    for (const auto& q : reqs) {
      auto h = s.submit(q);
      EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.error().message);
      if (h) hs.push_back(*h);
    }
    for (auto& h : hs) r.outcomes.push_back(drain(*h));
  } else {
    for (const auto& q : reqs) {
      auto h = s.submit(q);
      EXPECT_TRUE(h.ok()) << (h.ok() ? "" : h.error().message);
      if (h) r.outcomes.push_back(drain(**h));
    }
  }
  // The scheduler thread may still be closing the last sequence.
  auto idle = [&] { return s.stats().kv_blocks_free + s.stats().prefix_cache_blocks == s.stats().kv_blocks_total; };
  for (int i = 0; i < 200 && !idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  r.stats = s.stats();
  EXPECT_EQ(r.stats.kv_blocks_free + r.stats.prefix_cache_blocks, r.stats.kv_blocks_total)
      << "speculative rollback leaked KV blocks";
  return r;
}

// A drafter factory: ngram, or a draft model on `draft` (which must outlive the scheduler).
inline std::function<std::unique_ptr<Drafter>()> ngram_factory() {
  return [] { return std::make_unique<NgramDrafter>(); };
}
inline std::function<std::unique_ptr<Drafter>()> draft_factory(Engine& target, Engine& draft) {
  const double cost = draft_cost_estimate(target, draft);
  return [&draft, cost] { return std::make_unique<DraftModelDrafter>(draft, cost); };
}

inline SchedulerOptions speculative(std::function<std::unique_ptr<Drafter>()> f, int k, bool together) {
  SchedulerOptions o;
  o.max_step_tokens = together ? 64 : 512; // batched: prefill chunks share steps with verify steps
  o.max_running = together ? 8 : 1;
  o.make_drafter = std::move(f);
  o.spec_k = k;
  o.spec_max_batch = 64;                   // speculate in every batch: the gate is about identity
  o.spec_policy.adaptive = false;          // draft on every step
  return o;
}

inline void expect_same(const RunResult& got, const RunResult& want, const std::string& what) {
  ASSERT_EQ(got.outcomes.size(), want.outcomes.size()) << what;
  for (size_t i = 0; i < want.outcomes.size(); ++i) {
    EXPECT_EQ(got.outcomes[i].tokens, want.outcomes[i].tokens) << what << ", request " << i;
    EXPECT_EQ(got.outcomes[i].logprobs, want.outcomes[i].logprobs) << what << ", request " << i;
    EXPECT_EQ(got.outcomes[i].finish, want.outcomes[i].finish) << what << ", request " << i;
    EXPECT_LE(got.outcomes[i].accepted, got.outcomes[i].drafted) << what;
  }
}

// The gate: for K = 1..8, greedy and seeded, alone and batched, speculative output
// equals plain output. `factory` makes the drafter; `label` names it in messages.
// Returns the drafts accepted in all (the caller checks the drafter was useful).
inline int64_t identity_gate(Engine& target, const std::vector<int32_t>& base,
                             const std::function<std::function<std::unique_ptr<Drafter>()>()>& factory,
                             const std::string& label, int64_t max_tokens = 24) {
  int64_t accepted = 0, drafted = 0;
  for (bool sampled : {false, true}) {
    const auto reqs = requests(base, sampled, 3, max_tokens);
    const RunResult plain = run(target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
    for (int k = 1; k <= 8; ++k) {
      for (bool together : {false, true}) {
        const RunResult spec = run(target, speculative(factory(), k, together), reqs, together);
        const std::string what = label + " k=" + std::to_string(k) + (sampled ? " seeded" : " greedy") +
                                 (together ? " batched" : " alone");
        expect_same(spec, plain, what);
        EXPECT_GT(spec.stats.spec_drafted, 0) << what << ": nothing was drafted, the gate tested nothing";
        accepted += spec.stats.spec_accepted;
        drafted += spec.stats.spec_drafted;
      }
    }
  }
  std::cout << "[ " << label << " ] drafts accepted " << accepted << " of " << drafted << "\n";
  return accepted;
}

// Teeth: a verify step whose tokens after the first differ from what one-token steps
// sample (a non-invariant kernel) must change the output the gate compares.
inline bool gate_notices_non_invariance(Engine& target, const std::vector<int32_t>& base,
                                        std::function<std::unique_ptr<Drafter>()> factory) {
  const auto reqs = requests(base, false, 3, 24);
  const RunResult plain = run(target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
  SchedulerOptions o = speculative(std::move(factory), 4, true);
  o.verify_hook = [](std::vector<int32_t>& tokens) {
    for (size_t i = 1; i < tokens.size(); ++i) tokens[i] = tokens[i] == 0 ? 1 : tokens[i] - 1;
  };
  const RunResult broken = run(target, o, reqs, true);
  for (size_t i = 0; i < plain.outcomes.size(); ++i)
    if (broken.outcomes[i].tokens != plain.outcomes[i].tokens) return true;
  return false;
}

}  // namespace memra::spec_gates
