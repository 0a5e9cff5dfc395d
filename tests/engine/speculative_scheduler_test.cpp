// Speculative decoding inside the serving scheduler, on the CPU backend: the
// identity gates of tests/engine/speculative_gates.hpp for the n-gram drafter and
// for a draft model (the Q8_0 GGUF of the same llama fixture drafting for the
// bf16 safetensors target), their teeth, and the two fallbacks (per-sequence
// acceptance, batch load) never changing a token.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/text_model.hpp"
#include "tests/engine/speculative_gates.hpp"
#include "tests/engine/test_plugins.hpp"

using namespace memra::spec_gates;

namespace {

const fs::path kLlama = fs::path(MEMRA_FIXTURES_DIR) / "models/llama";
const fs::path kDraft = fs::path(MEMRA_FIXTURES_DIR) / "gguf/llama/llama-Q8_0.gguf";

EngineOptions options() {
  EngineOptions eo;
  eo.max_context = 256;
  eo.max_sequences = 12;
  eo.block_size = 8;
  return eo;
}

std::unique_ptr<Engine> load_target() {
  auto src = open_model_source(kLlama.string(), test_plugins());
  EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  auto e = Engine::create(std::move(*src), test_plugins(), options());
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

std::unique_ptr<Engine> load_draft(const Engine& target) {
  auto tok = load_tokenizer(kLlama.string());
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  if (!tok) return nullptr;
  auto d = open_draft_engine(kDraft.string(), target, **tok, test_plugins(), options());
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d ? std::move(*d) : nullptr;
}

std::vector<int32_t> base_prompt() {
  const auto ref = nlohmann::json::parse(std::ifstream(kLlama / "reference.json"));
  return ref["input_ids"].get<std::vector<int32_t>>();
}

#define NEED_FIXTURES()                                                                                      \
  do {                                                                                                       \
    if (!fs::exists(kLlama / "reference.json") || !fs::exists(kDraft))                                      \
      GTEST_SKIP() << "fixtures absent (" << kLlama << ", " << kDraft << "); see /work/shared/fixtures";     \
  } while (0)

}  // namespace

TEST(EngineSpeculativeScheduler, NgramOutputEqualsPlainForK1To8) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  const int64_t accepted = identity_gate(*target, base_prompt(), [] { return ngram_factory(); }, "ngram");
  EXPECT_GT(accepted, 0) << "prompt lookup was never right: the gate did not exercise acceptance";
}

TEST(EngineSpeculativeScheduler, DraftModelOutputEqualsPlainForK1To8) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto draft = load_draft(*target);
  ASSERT_TRUE(draft);
  const int64_t accepted = identity_gate(*target, base_prompt(), [&] { return draft_factory(*target, *draft); }, "draft Q8_0", 16);
  EXPECT_GT(accepted, 0) << "the Q8_0 draft of the same model was never right";
  EXPECT_EQ(draft->kv_blocks().num_free(), draft->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}

TEST(EngineSpeculativeScheduler, TheGatesCatchANonInvariantVerifyStep) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto draft = load_draft(*target);
  ASSERT_TRUE(draft);
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), ngram_factory()))
      << "ngram: the identity gate did not notice a non-invariant verify step";
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), draft_factory(*target, *draft)))
      << "draft model: the identity gate did not notice a non-invariant verify step";
}

TEST(EngineSpeculativeScheduler, FallbackSwitchingNeverChangesTokens) {
  NEED_FIXTURES();
  auto target = load_target();
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

TEST(EngineSpeculativeScheduler, BatchLoadTurnsSpeculationOff) {
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
TEST(EngineSpeculativeScheduler, ABatchedSelfDraftIsAlwaysAcceptedGreedy) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto tok = load_tokenizer(kLlama.string());
  ASSERT_TRUE(tok.ok());
  auto self = open_draft_engine(kLlama.string(), *target, **tok, test_plugins(), options());
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
TEST(EngineSpeculativeScheduler, ADraftEngineOutOfKvOnlyDraftsLess) {
  NEED_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto tok = load_tokenizer(kLlama.string());
  ASSERT_TRUE(tok.ok());
  EngineOptions small = options();
  small.max_context = 64;     // 8 blocks of 8 tokens in all: about one sequence
  small.max_sequences = 1;
  auto draft = open_draft_engine(kDraft.string(), *target, **tok, test_plugins(), small);
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
