// Speculative decoding inside the serving scheduler: the identity gates of
// tests/engine/speculative_gates.hpp for the n-gram drafter and for a draft model (the
// Q8_0 GGUF of the same llama fixture drafting for the bf16 safetensors target, both on
// the backend under test), their teeth and the acceptance fallback never changing a
// token, on each backend (tests/support/backends.hpp); then, on the CPU, the batch-load
// fallback, a batched self-draft and a draft engine out of KV.
#include <gtest/gtest.h>

#include "host/engine/text_model.hpp"
#include "tests/engine/speculative_gates.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"

using namespace memra::spec_gates;
using memra::testing::build_plugins;

namespace {

fs::path llama() { return memra::testing::fixture("models/llama"); }
fs::path q8() { return memra::testing::fixture("gguf/llama/llama-Q8_0.gguf"); }

EngineOptions options(memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  EngineOptions eo = memra::testing::engine_options(kind);
  eo.max_context = 256;
  eo.max_sequences = 12;
  eo.block_size = 8;
  return eo;
}

std::unique_ptr<Engine> load_target(memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  return memra::testing::open_engine(llama(), options(kind));
}

std::unique_ptr<Engine> load_draft(const Engine& target, memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  auto tok = load_tokenizer(llama().string());
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  if (!tok) return nullptr;
  auto d = open_draft_engine(q8().string(), target, **tok, build_plugins(), options(kind));
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d ? std::move(*d) : nullptr;
}

std::vector<int32_t> base_prompt() { return memra::testing::reference_prompt(llama()); }

#define NEED_FIXTURES()                                                                                      \
  do {                                                                                                       \
    if (!memra::testing::has_reference(llama()) || !fs::exists(q8()))                                       \
      GTEST_SKIP() << "fixtures absent (" << llama() << ", " << q8() << "); see /work/shared/fixtures";      \
  } while (0)

// The gates on each backend.
class EngineSpeculativeScheduler : public memra::testing::BackendTest {
 protected:
  void SetUp() override {
    memra::testing::BackendTest::SetUp();
    if (IsSkipped()) return;
    NEED_FIXTURES();
  }
  std::string label(const std::string& drafter) const { return std::string(memra::testing::backend_name(GetParam())) + " " + drafter; }
};

}  // namespace

TEST_P(EngineSpeculativeScheduler, NgramOutputEqualsPlainForK1To8) {
  auto target = load_target(GetParam());
  ASSERT_TRUE(target);
  const int64_t accepted = identity_gate(*target, base_prompt(), [] { return ngram_factory(); }, label("ngram"));
  EXPECT_GT(accepted, 0) << "prompt lookup was never right: the gate did not exercise acceptance";
}

TEST_P(EngineSpeculativeScheduler, DraftModelOutputEqualsPlainForK1To8) {
  auto target = load_target(GetParam());
  ASSERT_TRUE(target);
  auto draft = load_draft(*target, GetParam());
  ASSERT_TRUE(draft);
  const int64_t accepted = identity_gate(*target, base_prompt(), [&] { return draft_factory(*target, *draft); }, label("draft Q8_0"), 16);
  EXPECT_GT(accepted, 0) << "the Q8_0 draft of the same model was never right";
  EXPECT_EQ(draft->kv_blocks().num_free(), draft->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}

TEST_P(EngineSpeculativeScheduler, TheGatesCatchANonInvariantVerifyStep) {
  auto target = load_target(GetParam());
  ASSERT_TRUE(target);
  auto draft = load_draft(*target, GetParam());
  ASSERT_TRUE(draft);
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), ngram_factory()))
      << "ngram: the identity gate did not notice a non-invariant verify step";
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), draft_factory(*target, *draft)))
      << "draft model: the identity gate did not notice a non-invariant verify step";
}

TEST_P(EngineSpeculativeScheduler, FallbackSwitchingNeverChangesTokens) {
  auto target = load_target(GetParam());
  ASSERT_TRUE(target);
  for (bool sampled : {false, true}) {
    const auto reqs = requests(base_prompt(), sampled, 3, 40);
    const RunResult plain = run(*target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
    // Verify tokens priced so high that speculation always looks slower: the gate
    // closes after every measured step and re-probes two tokens later.
    SchedulerOptions o = speculative(ngram_factory(), 4, true);
    o.spec_policy = {.adaptive = true, .verify_token_cost = 5.0, .warmup_steps = 1, .reprobe_after = 2, .smoothing = 0.25};
    const RunResult toggled = run(*target, o, reqs, true);
    expect_same(toggled, plain, sampled ? "toggling, seeded" : "toggling, greedy");
    EXPECT_GT(toggled.stats.spec_fallbacks, 1) << "the fallback never switched speculation off";
    EXPECT_GT(toggled.stats.spec_verify_steps, toggled.stats.spec_fallbacks - 1) << "it never re-probed";
    // Cheap verify tokens: the same drafts keep speculation on.
    o.spec_policy.verify_token_cost = 0.0;
    const RunResult kept = run(*target, o, reqs, true);
    expect_same(kept, plain, "never toggling");
    EXPECT_EQ(kept.stats.spec_fallbacks, 0) << "speculation that costs nothing was switched off";
  }
}

MEMRA_INSTANTIATE_BACKENDS(EngineSpeculativeScheduler);

TEST(EngineSpeculativeSchedulerCpu, BatchLoadTurnsSpeculationOff) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  const auto reqs = requests(base_prompt(), false, 3, 24);
  const RunResult plain = run(*target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
  SchedulerOptions o = speculative(ngram_factory(), 4, true);
  o.spec_max_batch = 2;  // three run together: no speculation until one has finished
  const RunResult loaded = run(*target, o, reqs, true);
  expect_same(loaded, plain, "batch-load fallback");
  o.spec_max_batch = 0;  // never
  const RunResult off = run(*target, o, reqs, true);
  expect_same(off, plain, "speculation off");
  EXPECT_EQ(off.stats.spec_drafted, 0) << "speculated above spec_max_batch";
}

// The target drafting for itself, batched: every greedy draft must be accepted —
// proof that the batched draft steps keep each draft sequence's KV on its context
// through every rollback.
TEST(EngineSpeculativeSchedulerCpu, ABatchedSelfDraftIsAlwaysAcceptedGreedy) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto tok = load_tokenizer(llama().string());
  ASSERT_TRUE(tok.ok());
  auto self = open_draft_engine(llama().string(), *target, **tok, build_plugins(), options());
  ASSERT_TRUE(self.ok()) << self.error().message;
  const auto reqs = requests(base_prompt(), false, 3, 32);
  const RunResult plain = run(*target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
  for (int k : {1, 3, 8}) {
    const RunResult spec = run(*target, speculative(draft_factory(*target, **self), k, true), reqs, true);
    expect_same(spec, plain, "self-draft k=" + std::to_string(k));
    for (const Outcome& o : spec.outcomes) {
      EXPECT_GT(o.drafted, 0) << "k=" << k;
      EXPECT_EQ(o.accepted, o.drafted) << "k=" << k << ": a self-draft was rejected";
    }
  }
  EXPECT_EQ((*self)->kv_blocks().num_free(), (*self)->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}

// A draft engine whose KV cache cannot hold every sequence: drafting degrades (the
// batch is retried one by one, a drafter that does not fit drafts nothing) and the
// output stays the same.
TEST(EngineSpeculativeSchedulerCpu, ADraftEngineOutOfKvOnlyDraftsLess) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto tok = load_tokenizer(llama().string());
  ASSERT_TRUE(tok.ok());
  EngineOptions small = options();
  small.max_context = 64;     // 8 blocks of 8 tokens in all: about one sequence
  small.max_sequences = 1;
  auto draft = open_draft_engine(q8().string(), *target, **tok, build_plugins(), small);
  ASSERT_TRUE(draft.ok()) << draft.error().message;
  for (bool sampled : {false, true}) {
    const auto reqs = requests(base_prompt(), sampled, 3, 24);
    const RunResult plain = run(*target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
    const RunResult spec = run(*target, speculative(draft_factory(*target, **draft), 4, true), reqs, true);
    expect_same(spec, plain, sampled ? "draft KV full, seeded" : "draft KV full, greedy");
    EXPECT_GT(spec.stats.spec_drafted, 0) << "nothing fitted the draft engine at all";
  }
  EXPECT_EQ((*draft)->kv_blocks().num_free(), (*draft)->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}
