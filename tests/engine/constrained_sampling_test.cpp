// Step 0 of the canonical sampler in the serving scheduler (logit_bias and per-sequence
// token constraints, host/engine/token_constraint.hpp), on every backend (the CUDA
// backend applies step 0 in its sampling kernel, the CPU reference on the host): the token
// is the canonical sampler's on the biased row computed here from the engine's own
// logits; constrained tokens stay inside the mask; and a constrained sequence's tokens
// are the same alone, batched with chunked prefill, with a prefix-cache hit, and with speculative decoding
// (drafts checked under the mask).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/drafter.hpp"
#include "host/engine/scheduler.hpp"
#include "kernels/sampling/sampling_ref.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;
using memra::engine::test_support::drain;
using Outcome = memra::engine::test_support::DrainedSequence;

namespace {

const fs::path kLlama = memra::testing::fixture("models/llama");

std::unique_ptr<Engine> load(memra_backend_kind kind) {
  EngineOptions eo = memra::testing::engine_options(kind);
  eo.max_context = 256;
  eo.max_sequences = 20;
  eo.block_size = 8;
  return memra::testing::open_engine(kLlama, eo);
}

std::vector<int32_t> prompt(int variant) {
  std::vector<int32_t> p;
  for (int i = 0; i < 20 + variant * 3; ++i) p.push_back((i * 37 + variant * 101) % 1000 + 5);
  return p;
}

// Allows, at output position k, only the tokens {10 + k % 3, 400 + k % 3, 800 + k % 3}
// (a state machine whose mask depends on the sequence's own tokens only).
class CyclicConstraint : public TokenConstraint {
 public:
  explicit CyclicConstraint(int64_t vocab) : vocab_(vocab) { fill(); }
  const std::vector<uint64_t>& allowed() override { return bits_; }
  bool advance(int32_t token) override {
    if (!allows(k_, token)) return false;
    ++k_;
    fill();
    return true;
  }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<CyclicConstraint>(*this); }
  static bool allows(int64_t k, int32_t t) {
    const int32_t r = static_cast<int32_t>(k % 3);
    return t == 10 + r || t == 400 + r || t == 800 + r;
  }

 private:
  void fill() {
    bits_.assign(static_cast<size_t>((vocab_ + 63) / 64), 0);
    for (int32_t t = 0; t < vocab_; ++t)
      if (allows(k_, t)) bits_[static_cast<size_t>(t >> 6)] |= uint64_t{1} << (t & 63);
  }
  int64_t vocab_;
  int64_t k_ = 0;
  std::vector<uint64_t> bits_;
};

SequenceRequest constrained(int variant, bool sampled, int64_t vocab) {
  SequenceRequest r;
  r.prompt = prompt(variant);
  r.max_tokens = 14;
  r.sampling.temperature = sampled ? 0.9f : 0.0f;
  r.sampling.seed = 99 + static_cast<uint64_t>(variant);
  r.sampling.logprobs = true;
  r.constraint = [vocab] { return std::make_unique<CyclicConstraint>(vocab); };
  return r;
}

class ConstrainedSampling : public memra::testing::BackendTest {};

}  // namespace

TEST_P(ConstrainedSampling, LogitBiasIsTheCanonicalSamplerOnTheBiasedRow) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto engine = load(GetParam());
  const std::vector<int32_t> p = prompt(2);
  // The prompt's last logits row, straight from the engine.
  std::vector<float> row;
  {
    const int32_t seq = engine->open_sequence();
    StepRequest req{seq, p, false, true};
    auto out = engine->step(std::span<const StepRequest>(&req, 1));
    ASSERT_TRUE(out.ok()) << out.error().message;
    row = (*out)[0];
    engine->close_sequence(seq);
  }
  ASSERT_EQ(static_cast<int64_t>(row.size()), engine->vocab_size());
  Scheduler s(*engine, {});
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    SequenceRequest r;
    r.prompt = p;
    r.max_tokens = 1;
    r.sampling.temperature = 1.0f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = seed;
    // A bias big enough to move the draw: +4 on 40 tokens, -100 on the row's best.
    std::vector<float> biased = row;
    int32_t best = argmax(row);
    for (int32_t t = 100; t < 140; ++t) r.logit_bias.push_back({t, 4.0f});
    r.logit_bias.push_back({best, -100.0f});
    std::sort(r.logit_bias.begin(), r.logit_bias.end(), [](auto& a, auto& b) { return a.id < b.id; });
    for (const auto& b : r.logit_bias) biased[static_cast<size_t>(b.id)] += b.bias;
    const int32_t want = memra::ref::sample_row(biased.data(), static_cast<int64_t>(biased.size()),
                                                row_params(r.sampling, p.size()), nullptr, 0);
    const Outcome o = drain(**s.submit(r));
    ASSERT_EQ(o.tokens.size(), 1u);
    EXPECT_EQ(o.tokens[0], want) << "seed " << seed;
    EXPECT_NE(o.tokens[0], best) << "a -100 bias bans the token";
  }
  // +100 makes a token the greedy choice at every step.
  SequenceRequest r;
  r.prompt = p;
  r.max_tokens = 10;
  r.sampling.temperature = 0.0f;
  r.logit_bias = {{777, 100.0f}};
  const Outcome o = drain(**s.submit(r));
  EXPECT_EQ(o.tokens, std::vector<int32_t>(10, 777));
}

TEST_P(ConstrainedSampling, MaskedTokensStayInTheMaskAloneBatchedAndSpeculating) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  for (bool sampled : {false, true}) {
    std::vector<Outcome> alone;
    {
      auto engine = load(GetParam());
      Scheduler s(*engine, {.max_step_tokens = 512, .max_running = 1, .max_waiting = 64});
      for (int v = 0; v < 8; ++v) alone.push_back(drain(**s.submit(constrained(v, sampled, engine->vocab_size()))));
    }
    for (int v = 0; v < 8; ++v) {
      const auto& t = alone[static_cast<size_t>(v)].tokens;
      ASSERT_EQ(t.size(), 14u);
      for (size_t k = 0; k < t.size(); ++k) EXPECT_TRUE(CyclicConstraint::allows(static_cast<int64_t>(k), t[k])) << k;
    }
    // Batched with unconstrained neighbours, prefill chunked at 7 tokens.
    {
      auto engine = load(GetParam());
      Scheduler s(*engine, {.max_step_tokens = 7, .max_running = 16, .max_waiting = 64});
      std::vector<std::shared_ptr<SequenceHandle>> hs, others;
      for (int v = 0; v < 8; ++v) {
        hs.push_back(*s.submit(constrained(v, sampled, engine->vocab_size())));
        SequenceRequest free = constrained(v + 8, sampled, engine->vocab_size());
        free.constraint = nullptr;
        others.push_back(*s.submit(std::move(free)));
      }
      for (int v = 0; v < 8; ++v) EXPECT_EQ(drain(*hs[static_cast<size_t>(v)]), alone[static_cast<size_t>(v)]) << v;
      for (auto& h : others) drain(*h);
    }
    // With a prefix-cache hit: the second run of each prompt reads its blocks from the cache.
    {
      auto engine = load(GetParam());
      Scheduler s(*engine, {});
      for (int v = 0; v < 8; ++v) {
        SequenceRequest r = constrained(v, sampled, engine->vocab_size());
        r.cache_namespace = "m\x1ft\x1f";
        const Outcome cold = drain(**s.submit(r));
        const Outcome warm = drain(**s.submit(r));
        EXPECT_EQ(cold, alone[static_cast<size_t>(v)]) << v;
        EXPECT_EQ(warm, alone[static_cast<size_t>(v)]) << v;
        EXPECT_GT(warm.cached, 0) << "no prefix-cache hit: the path was not exercised";
      }
    }
    // Speculative decoding with the n-gram drafter (the cyclic output repeats, so drafts
    // are fed, some of them refused by the mask).
    {
      auto engine = load(GetParam());
      SchedulerOptions so{.max_step_tokens = 512, .max_running = 8, .max_waiting = 64};
      so.make_drafter = [] { return std::make_unique<NgramDrafter>(); };
      so.spec_k = 4;
      so.spec_policy.adaptive = false;
      Scheduler s(*engine, so);
      int64_t drafted = 0;
      for (int v = 0; v < 8; ++v) {
        const Outcome o = drain(**s.submit(constrained(v, sampled, engine->vocab_size())));
        EXPECT_EQ(o, alone[static_cast<size_t>(v)]) << v;
        drafted += o.drafted;
      }
      EXPECT_GT(drafted, 0) << "the drafter proposed nothing: the speculative path was not exercised";
    }
  }
}

namespace {
class DeadEnd : public TokenConstraint {
 public:
  const std::vector<uint64_t>& allowed() override { return none_; }
  bool advance(int32_t) override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<DeadEnd>(); }

 private:
  std::vector<uint64_t> none_ = std::vector<uint64_t>(16, 0);
};
}  // namespace

TEST_P(ConstrainedSampling, AConstraintThatAllowsNothingFailsTheSequenceWithAReason) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto engine = load(GetParam());
  Scheduler s(*engine, {});
  SequenceRequest r;
  r.prompt = prompt(1);
  r.max_tokens = 4;
  r.constraint = [] { return std::make_unique<DeadEnd>(); };
  auto h = *s.submit(r);
  SequenceUpdate u;
  while (u.finish == FinishReason::none) h->wait(u, std::chrono::milliseconds(1000));
  EXPECT_EQ(u.finish, FinishReason::error);
  EXPECT_NE(u.error.find("allows no token"), std::string::npos) << u.error;
  EXPECT_EQ(s.stats().kv_blocks_free, s.stats().kv_blocks_total);
}

MEMRA_INSTANTIATE_BACKENDS(ConstrainedSampling);
