// Serving across pipeline stages: the continuous-batching scheduler over a pipeline
// engine gives every request the tokens and logprobs it gets over one backend, with
// chunked prefill and a prefix-cache hit on the second round:
//  - on each backend (tests/support/backends.hpp; CUDA stages spread over the GPUs there
//    are), rolling groups whose steps alternate in the stages' two step slots (two
//    groups' steps in flight at once), with logprobs (rows sampled on the host) and
//    without (on CUDA the rolling steps sample on the last stage's GPU);
//  - on CPU stages, whole steps and rolling groups in every combination, and
//    speculative decoding.
#include <gtest/gtest.h>

#include <filesystem>

#include "host/engine/scheduler.hpp"
#include "tests/engine/pipeline_test_run.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;

namespace {

fs::path qwen3() { return memra::testing::fixture("models/qwen3"); }

// The qwen3 fixture widened to 4 layers on `stages` stages of `kind`.
std::unique_ptr<Engine> load(int32_t stages, memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  EngineOptions eo = memra::testing::engine_options(kind);
  eo.max_context = 256;
  eo.max_sequences = 12;
  eo.block_size = 8;
  memra::testing::set_pipeline_stages(eo, stages, memra::testing::StageDevices::spread);
  return memra::pipeline_test::make_engine(memra::pipeline_test::open_source(qwen3(), 4), eo);
}

using Outcome = memra::engine::test_support::DrainedSequence;
using memra::engine::test_support::drain;

SequenceRequest request(int v, bool logprobs) {
  SequenceRequest r;
  for (int i = 0; i < 18 + v * 3; ++i) r.prompt.push_back((i * 37 + v * 101) % 1000 + 5);
  r.max_tokens = 10;
  r.sampling.temperature = v % 2 ? 0.8f : 0.0f;  // greedy and seeded sampling
  r.sampling.seed = 99 + static_cast<uint64_t>(v);
  r.sampling.logprobs = logprobs;
  r.cache_namespace = "model\x1ftenant\x1f";
  return r;
}

// Two rounds of 8 concurrent requests (the second round hits the prefix cache).
std::vector<Outcome> serve(Engine& e, bool speculative, int32_t groups = 1, bool logprobs = true) {
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
    for (int v = 0; v < 8; ++v) hs.push_back(*s.submit(request(v, logprobs)));
    for (auto& h : hs) out.push_back(drain(*h));
  }
  EXPECT_EQ(s.stats().running, 0);
  return out;
}

}  // namespace

using PipelineServing = memra::testing::BackendTest;

// Rolling groups: stage 0 runs one group's step while stage 1 runs the other's (slot
// scratch, results waited on per slot), against one backend serving one step at a time.
TEST_P(PipelineServing, RollingGroupsServeOneBackendsTokens) {
  MEMRA_SKIP_WITHOUT_FIXTURE(qwen3());
  auto one = load(1, GetParam());
  auto pp = load(2, GetParam());
  ASSERT_TRUE(one && pp);
  std::cout << "[ rolling groups ] " << pp->backend().describe() << "\n";
  for (bool logprobs : {false, true}) {
    const auto ref = serve(*one, false, 1, logprobs);
    const auto got = serve(*pp, false, 2, logprobs);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].finish, FinishReason::length) << "request " << i;
      EXPECT_TRUE(got[i] == ref[i]) << "request " << i << " differs with rolling groups"
                                    << (logprobs ? " (host sampling, logprobs)" : " (device sampling where there is one)");
    }
  }
}

MEMRA_INSTANTIATE_BACKENDS(PipelineServing);

TEST(PipelineServingCpu, SchedulerGivesOneBackendsTokens) {
  MEMRA_SKIP_WITHOUT_FIXTURE(qwen3());
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

TEST(PipelineServingCpu, SpeculativeServingAcrossStagesGivesPlainTokens) {
  MEMRA_SKIP_WITHOUT_FIXTURE(qwen3());
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
