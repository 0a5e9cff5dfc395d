// Serving across pipeline stages: the continuous-batching scheduler over a pipeline
// engine (CPU stages; whole steps and rolling groups whose steps
// alternate in the engine's two step slots) gives every request the
// tokens and logprobs it gets over one backend, with chunked prefill, a prefix-cache
// hit on the second round, and speculative decoding.
#include <gtest/gtest.h>

#include <filesystem>

#include "host/engine/scheduler.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/engine/pipeline_test_models.hpp"
#include "tests/engine/test_plugins.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;

namespace {

const fs::path kQwen3 = fs::path(MEMRA_FIXTURES_DIR) / "models/qwen3";

std::unique_ptr<Engine> load(int32_t stages) {
  auto src = open_model_source(kQwen3.string(), test_plugins());
  EXPECT_TRUE(src.ok());
  if (!src) return nullptr;
  memra::pipeline_test::widen(**src, 4);
  EngineOptions eo;
  eo.max_context = 256;
  eo.max_sequences = 12;
  eo.block_size = 8;
  eo.pipeline_stages = stages;
  auto e = Engine::create(std::move(*src), test_plugins(), eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

using Outcome = memra::engine::test_support::DrainedSequence;
using memra::engine::test_support::drain;

SequenceRequest request(int v) {
  SequenceRequest r;
  for (int i = 0; i < 18 + v * 3; ++i) r.prompt.push_back((i * 37 + v * 101) % 1000 + 5);
  r.max_tokens = 10;
  r.sampling.temperature = v % 2 ? 0.8f : 0.0f;  // greedy and seeded sampling
  r.sampling.seed = 99 + static_cast<uint64_t>(v);
  r.sampling.logprobs = true;
  r.cache_namespace = "model\x1ftenant\x1f";
  return r;
}

// Two rounds of 8 concurrent requests (the second round hits the prefix cache).
std::vector<Outcome> serve(Engine& e, bool speculative, int32_t groups = 1) {
  SchedulerOptions so;
  so.pipeline_groups = groups;
  so.max_step_tokens = 11;  // chunked prefill
  so.max_running = 8;
  if (speculative) {
    // Room for drafts beside 4 decoding sequences (a group of 8 split in two).
    so.max_step_tokens = 48;
    so.make_drafter = [] { return std::make_unique<NgramDrafter>(); };
    so.spec_policy.adaptive = false;
    so.spec_max_batch = 8;
  }
  Scheduler s(e, so);
  std::vector<Outcome> out;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<SequenceHandle>> hs;
    for (int v = 0; v < 8; ++v) hs.push_back(*s.submit(request(v)));
    for (auto& h : hs) out.push_back(drain(*h));
  }
  EXPECT_EQ(s.stats().running, 0);
  return out;
}

}  // namespace

TEST(PipelineServing, SchedulerGivesOneBackendsTokens) {
  if (!fs::exists(kQwen3)) GTEST_SKIP() << "fixture " << kQwen3 << " absent (expects ../shared/fixtures)";
  auto one = load(1);
  ASSERT_TRUE(one);
  const auto ref = serve(*one, false);
  int64_t cached = 0;
  for (size_t i = 8; i < ref.size(); ++i) cached += ref[i].cached;
  EXPECT_GT(cached, 0) << "the second round should hit the prefix cache";
  struct Case {
    int32_t stages, groups;
  };
  for (auto [stages, groups] : {Case{2, 1}, Case{3, 1}, Case{2, 2}, Case{1, 2}}) {
    auto pp = load(stages);
    ASSERT_TRUE(pp);
    const auto got = serve(*pp, false, groups);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_TRUE(got[i] == ref[i]) << stages << " stages, " << groups << " groups: request " << i;
      EXPECT_EQ(got[i].cached, ref[i].cached) << "request " << i;
    }
  }
}

TEST(PipelineServing, SpeculativeServingAcrossStagesGivesPlainTokens) {
  if (!fs::exists(kQwen3)) GTEST_SKIP() << "fixture " << kQwen3 << " absent (expects ../shared/fixtures)";
  auto one = load(1);
  auto pp = load(2);
  ASSERT_TRUE(one && pp);
  const auto plain = serve(*one, false);
  for (int32_t groups : {1, 2}) {
    const auto spec = serve(*pp, true, groups);
    ASSERT_EQ(spec.size(), plain.size());
    int64_t drafted = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      EXPECT_TRUE(spec[i] == plain[i]) << groups << " groups: request " << i;
      drafted += spec[i].drafted;
    }
    EXPECT_GT(drafted, 0) << groups << " groups: no verify step ran: the test would not cover speculation";
  }
}
