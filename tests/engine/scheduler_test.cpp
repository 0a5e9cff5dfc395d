// The scheduler's exactness contract on the CPU backend: a sequence's tokens (and
// logprobs) are identical alone, among 16 concurrent others with chunked prefill,
// and with a prefix-cache hit; cancellation frees KV; the queue is bounded.
#include <gtest/gtest.h>

#include <filesystem>

#include "host/engine/scheduler.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;

namespace {

const fs::path kLlama = memra::testing::fixture("models/llama");

std::unique_ptr<Engine> load() {
  EngineOptions eo;
  eo.max_context = 256;
  eo.max_sequences = 20;
  eo.block_size = 8;
  return memra::testing::open_engine(kLlama, eo);
}

using Outcome = memra::engine::test_support::DrainedSequence;
using memra::engine::test_support::drain;
using memra::engine::test_support::varied_request;

}  // namespace

TEST(EngineScheduler, TokensDoNotDependOnBatchingOrChunking) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  for (bool sampled : {false, true}) {
    // Alone, one sequence at a time with a large step budget.
    std::vector<Outcome> alone;
    {
      auto engine = load();
      Scheduler s(*engine, {.max_step_tokens = 512, .max_running = 1, .max_waiting = 64});
      for (int v = 0; v < 17; ++v) alone.push_back(drain(**s.submit(varied_request(v, sampled))));
    }
    // Together: 17 at once, prefill chunked at 7 tokens per step.
    auto engine = load();
    Scheduler s(*engine, {.max_step_tokens = 7, .max_running = 17, .max_waiting = 64});
    std::vector<std::shared_ptr<SequenceHandle>> hs;
    for (int v = 0; v < 17; ++v) hs.push_back(*s.submit(varied_request(v, sampled)));
    for (int v = 0; v < 17; ++v) {
      const Outcome o = drain(*hs[static_cast<size_t>(v)]);
      EXPECT_EQ(o.tokens, alone[static_cast<size_t>(v)].tokens) << "variant " << v << (sampled ? " sampled" : " greedy");
      EXPECT_EQ(o.logprobs, alone[static_cast<size_t>(v)].logprobs) << "variant " << v;
      EXPECT_EQ(o.finish, FinishReason::length);
    }
    EXPECT_EQ(s.stats().kv_blocks_free, s.stats().kv_blocks_total) << "KV blocks leaked";
  }
}

TEST(EngineScheduler, PrefixCacheHitGivesIdenticalTokens) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto engine = load();
  Scheduler s(*engine, {});
  SequenceRequest r = varied_request(3, true);
  r.cache_namespace = "model\x1ftenant-a\x1f";
  const Outcome cold = drain(**s.submit(r));
  EXPECT_EQ(cold.cached, 0);
  const Outcome warm = drain(**s.submit(r));
  EXPECT_EQ(warm.cached, 24) << "29-token prompt, 8-token blocks: 3 full blocks reusable";
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_EQ(warm.logprobs, cold.logprobs);
  // Another tenant's namespace never hits.
  r.cache_namespace = "model\x1ftenant-b\x1f";
  EXPECT_EQ(drain(**s.submit(r)).cached, 0);
}

TEST(EngineScheduler, CancelFreesKvAndRejectsImpossibleRequests) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto engine = load();
  Scheduler s(*engine, {.max_step_tokens = 4, .max_running = 4, .max_waiting = 2});
  SequenceRequest r = varied_request(1, false);
  r.max_tokens = 200;
  auto h = *s.submit(r);
  SequenceUpdate u;
  while (u.tokens.empty()) h->wait(u, std::chrono::milliseconds(1000));
  h->cancel();
  const Outcome o = drain(*h);
  EXPECT_EQ(o.finish, FinishReason::cancelled);
  for (int i = 0; i < 100 && s.stats().kv_blocks_free != s.stats().kv_blocks_total; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.stats().kv_blocks_free, s.stats().kv_blocks_total);

  SequenceRequest too_long = varied_request(1, false);
  too_long.max_tokens = 1000;
  auto bad = s.submit(too_long);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("context"), std::string::npos);
  SequenceRequest bad_id = varied_request(1, false);
  bad_id.prompt[0] = 5000;
  EXPECT_FALSE(s.submit(bad_id).ok());
}
