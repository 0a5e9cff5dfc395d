// The speculative-decoding identity gate of the generation loop (generate_speculative,
// what memra-gen and memra-bench run) on each backend (tests/support/backends.hpp):
// for K = 1..8, greedy and seeded sampling, speculative decoding with the n-gram
// drafter and with a draft model (the Q8_0 GGUF of the llama fixture drafting for its
// bf16 target, both on the backend under test) yields exactly the tokens and logprobs
// of plain decode, and the gate has teeth: a verify step whose logits differ from
// single-token steps (a non-invariant kernel) is caught. Then, on the CPU: a self-draft
// always accepted, the acceptance fallback, the gate's policy, and a draft with
// another tokenizer refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/draft_loader.hpp"
#include "host/engine/draft_model.hpp"
#include "host/engine/generate.hpp"
#include "host/engine/text_model.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;
using memra::testing::build_plugins;

namespace {

fs::path llama() { return memra::testing::fixture("models/llama"); }
fs::path q8() { return memra::testing::fixture("gguf/llama/llama-Q8_0.gguf"); }

SpeculativeOptions spec_options(Drafter* d, int k, std::function<void(std::vector<int32_t>&)> hook = {}) {
  SpeculativeOptions s;
  s.drafter = d;
  s.k = k;
  s.policy.adaptive = false;  // speculate on every step: the gate is about identity
  s.verify_hook = std::move(hook);
  return s;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int64_t drafted = 0, accepted = 0;
};

Outcome run_generation(Engine& e, const std::vector<int32_t>& prompt, const GenerateOptions& g, const SpeculativeOptions* spec) {
  Outcome r;
  auto on = [&](const TokenEvent& ev) {
    r.logprobs.push_back(ev.logprob);
    return true;
  };
  auto out = spec ? generate_speculative(e, prompt, g, *spec, on) : generate(e, prompt, g, nullptr, on);
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  if (!out) return r;
  r.tokens = out->tokens;
  r.drafted = out->drafted;
  r.accepted = out->accepted;
  return r;
}

EngineOptions engine_options(memra_backend_kind kind) {
  EngineOptions eo = memra::testing::engine_options(kind);
  eo.max_context = 256;
  eo.max_sequences = 12;
  return eo;
}

std::unique_ptr<Engine> load_engine(const fs::path& path, memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  return memra::testing::open_engine(path, engine_options(kind));
}

memra::Result<std::unique_ptr<Engine>> open_draft(const fs::path& draft, const Engine& target, memra_backend_kind kind = MEMRA_BACKEND_CPU) {
  auto tok = load_tokenizer(llama().string());
  if (!tok) return tok.error();
  return open_draft_engine(draft.string(), target, **tok, build_plugins(), engine_options(kind));
}

std::vector<int32_t> fixture_prompt() { return memra::testing::reference_prompt(llama()); }

GenerateOptions options(bool sampled) {
  GenerateOptions g;
  g.max_tokens = 40;
  g.sampling.logprobs = true;
  g.sampling.temperature = 0.0f;
  if (sampled) {
    // Sharp enough that the random model still repeats itself, so drafts get accepted.
    g.sampling.temperature = 0.5f;
    g.sampling.top_k = 2;
    g.sampling.top_p = 0.95f;
    g.sampling.seed = 77;
  }
  return g;
}

// Tokens after the first of a multi-token verify step come out different from what
// one-token steps sample: a kernel that is not batch invariant.
void break_invariance(std::vector<int32_t>& tokens) {
  for (size_t i = 1; i < tokens.size(); ++i) tokens[i] = tokens[i] == 0 ? 1 : tokens[i] - 1;
}

// The gates on each backend.
class EngineSpeculative : public memra::testing::BackendTest {
 protected:
  void SetUp() override {
    memra::testing::BackendTest::SetUp();
    if (IsSkipped()) return;
    if (!memra::testing::has_reference(llama())) GTEST_SKIP() << "fixture " << llama() << " absent";
  }
};

}  // namespace

TEST_P(EngineSpeculative, NgramIsTokenIdenticalToPlainDecodeForK1To8) {
  auto engine = load_engine(llama(), GetParam());
  ASSERT_TRUE(engine);
  const auto prompt = fixture_prompt();
  for (bool sampled : {false, true}) {
    const Outcome plain = run_generation(*engine, prompt, options(sampled), nullptr);
    ASSERT_EQ(plain.tokens.size(), 40u);
    int64_t accepted_total = 0;
    for (int k = 1; k <= 8; ++k) {
      NgramDrafter drafter;
      SpeculativeOptions s = spec_options(&drafter, k);
      const Outcome spec = run_generation(*engine, prompt, options(sampled), &s);
      EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k << (sampled ? " sampled" : " greedy");
      EXPECT_EQ(spec.logprobs, plain.logprobs) << "k=" << k;
      EXPECT_LE(spec.accepted, spec.drafted);
      accepted_total += spec.accepted;
    }
    // The random model repeats itself, so prompt lookup must have been right sometimes.
    EXPECT_GT(accepted_total, 0) << (sampled ? "sampled" : "greedy");
  }
  EXPECT_EQ(engine->kv_blocks().num_free(), engine->kv_blocks().num_blocks()) << "rollback leaked KV blocks";
}

TEST_P(EngineSpeculative, TheGateCatchesANonInvariantVerifyStep) {
  auto engine = load_engine(llama(), GetParam());
  ASSERT_TRUE(engine);
  const auto prompt = fixture_prompt();
  const Outcome plain = run_generation(*engine, prompt, options(false), nullptr);
  NgramDrafter drafter;
  SpeculativeOptions s = spec_options(&drafter, 4, break_invariance);
  const Outcome broken = run_generation(*engine, prompt, options(false), &s);
  EXPECT_NE(broken.tokens, plain.tokens) << "the identity gate did not notice a non-invariant verify step";
}

TEST_P(EngineSpeculative, DraftModelIsTokenIdenticalToPlainDecodeForK1To8) {
  if (!fs::exists(q8())) GTEST_SKIP() << "fixture " << q8() << " absent";
  auto target = load_engine(llama(), GetParam());
  ASSERT_TRUE(target);
  auto draft = open_draft(q8(), *target, GetParam());
  ASSERT_TRUE(draft.ok()) << draft.error().message;
  const auto prompt = fixture_prompt();
  for (bool sampled : {false, true}) {
    const Outcome plain = run_generation(*target, prompt, options(sampled), nullptr);
    int64_t accepted = 0, drafted = 0;
    for (int k = 1; k <= 8; ++k) {
      DraftModelDrafter drafter(**draft, draft_cost_estimate(*target, **draft));
      SpeculativeOptions s = spec_options(&drafter, k);
      const Outcome spec = run_generation(*target, prompt, options(sampled), &s);
      EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k << (sampled ? " sampled" : " greedy");
      EXPECT_EQ(spec.logprobs, plain.logprobs) << "k=" << k;
      accepted += spec.accepted;
      drafted += spec.drafted;
    }
    std::cout << "[ draft Q8_0 on " << memra::testing::backend_name(GetParam()) << ", " << (sampled ? "seeded" : "greedy")
              << " ] accepted " << accepted << " of " << drafted << "\n";
    // Greedy, the Q8_0 copy of the same weights agrees almost always; seeded, the
    // target draws between near-equal tokens the greedy draft cannot foresee.
    if (sampled) EXPECT_GT(accepted, 0);
    else EXPECT_GT(accepted, drafted * 9 / 10) << "the Q8_0 draft of the same model should mostly agree";
  }
  {
    // Teeth: the same drafter with a non-invariant verify step changes the tokens.
    DraftModelDrafter drafter(**draft, 0.5);
    SpeculativeOptions s = spec_options(&drafter, 4, break_invariance);
    EXPECT_NE(run_generation(*target, prompt, options(false), &s).tokens, run_generation(*target, prompt, options(false), nullptr).tokens)
        << "the identity gate did not notice a non-invariant verify step (draft model)";
  }
  // Every drafter is gone: their draft sequences with them.
  EXPECT_EQ((*draft)->kv_blocks().num_free(), (*draft)->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}

MEMRA_INSTANTIATE_BACKENDS(EngineSpeculative);

// The draft model is the target itself: greedy drafts must all be accepted — proof
// that the drafter's KV tracks the context through every rollback.
TEST(EngineSpeculativeCpu, ASelfDraftIsAlwaysAcceptedGreedy) {
  MEMRA_SKIP_WITHOUT_FIXTURE(llama());
  auto target = load_engine(llama());
  ASSERT_TRUE(target);
  auto draft = open_draft(llama(), *target);
  ASSERT_TRUE(draft.ok()) << draft.error().message;
  const auto prompt = fixture_prompt();
  const Outcome plain = run_generation(*target, prompt, options(false), nullptr);
  for (int k = 1; k <= 8; ++k) {
    DraftModelDrafter drafter(**draft, 1.0);
    SpeculativeOptions s = spec_options(&drafter, k);
    const Outcome spec = run_generation(*target, prompt, options(false), &s);
    EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k;
    EXPECT_EQ(spec.logprobs, plain.logprobs) << "k=" << k;
    EXPECT_GT(spec.drafted, 0) << "k=" << k;
    EXPECT_EQ(spec.accepted, spec.drafted) << "k=" << k << ": a self-draft was rejected";
    EXPECT_LE(drafter.tokens_in_kv(), static_cast<int64_t>(prompt.size() + plain.tokens.size()));
  }
  EXPECT_EQ((*draft)->kv_blocks().num_free(), (*draft)->kv_blocks().num_blocks()) << "draft sequences leaked KV";
}

TEST(EngineSpeculativeCpu, FallbackSwitchingNeverChangesTokens) {
  MEMRA_SKIP_WITHOUT_FIXTURE(llama());
  auto target = load_engine(llama());
  ASSERT_TRUE(target);
  const auto prompt = fixture_prompt();
  for (bool sampled : {false, true}) {
    const Outcome plain = run_generation(*target, prompt, options(sampled), nullptr);
    NgramDrafter drafter;
    SpeculativeOptions s = spec_options(&drafter, 4);
    s.policy = {.adaptive = true, .verify_token_cost = 5.0, .warmup_steps = 1, .reprobe_after = 3, .smoothing = 0.25};
    auto out = generate_speculative(*target, prompt, options(sampled), s, nullptr);
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(out->tokens, plain.tokens) << (sampled ? "sampled" : "greedy");
    EXPECT_GT(out->fallbacks, 1) << "the fallback never switched speculation off";
    EXPECT_GT(out->plain_steps, 0);
    EXPECT_GE(out->verify_steps, out->fallbacks) << "it never re-probed";
  }
}

TEST(EngineSpeculativeCpu, SpecGateFallsBackWhenSlowerAndReprobes) {
  SpecPolicy p;
  p.verify_token_cost = 0.1;
  p.warmup_steps = 2;
  p.reprobe_after = 5;
  SpecGate gate(p, 0.0);
  EXPECT_TRUE(gate.active());
  gate.record(4, 0);  // cost 1.4, 1 token: slower, but still warming up
  EXPECT_TRUE(gate.active());
  gate.record(4, 0);
  EXPECT_FALSE(gate.active()) << "1 token per 1.4 steps is slower than plain decode";
  EXPECT_EQ(gate.fallbacks(), 1);
  gate.plain(4);
  EXPECT_FALSE(gate.active());
  gate.plain(1);
  EXPECT_TRUE(gate.active()) << "re-probes after reprobe_after plain tokens";
  for (int i = 0; i < 10; ++i) gate.record(4, 3);  // 4 tokens per 1.4 steps
  EXPECT_TRUE(gate.active());
  EXPECT_NEAR(gate.estimated_speedup(), 4.0 / 1.4, 1e-9);
  // A draft model costing half a step per token makes the same acceptance a loss.
  SpecGate costly(p, 0.9);
  costly.record(4, 3);
  costly.record(4, 3);  // 4 tokens per 1 + 4 * (0.1 + 0.9) = 5 steps
  EXPECT_FALSE(costly.active());
  // Not adaptive: never switches off.
  p.adaptive = false;
  SpecGate fixed(p, 0.9);
  for (int i = 0; i < 10; ++i) fixed.record(8, 0);
  EXPECT_TRUE(fixed.active());
}

TEST(EngineSpeculativeCpu, ADraftWithAnotherTokenizerIsRefused) {
  MEMRA_SKIP_WITHOUT_FIXTURE(llama());
  auto target = load_engine(llama());
  ASSERT_TRUE(target);
  for (const char* variant : {"text", "size"}) {
    const bool text = std::string(variant) == "text";
    const memra::testing::TempDir tmp("memra-spec-tok");
    const fs::path& dir = tmp.path();
    for (const char* f : {"model.safetensors", "tokenizer_config.json", "generation_config.json"})
      if (fs::exists(llama() / f)) fs::create_symlink(llama() / f, dir / f);
    auto config = nlohmann::ordered_json::parse(std::ifstream(llama() / "config.json"));
    auto tok = nlohmann::ordered_json::parse(std::ifstream(llama() / "tokenizer.json"));
    if (text) {
      // Two tokens swap texts: same size, different tokenizer.
      auto& vocab = tok["model"]["vocab"];
      std::string a, b;
      for (auto it = vocab.begin(); it != vocab.end(); ++it) {
        if (it.value() == 300) a = it.key();
        if (it.value() == 301) b = it.key();
      }
      vocab[a] = 301;
      vocab[b] = 300;
    } else {
      config["vocab_size"] = 2048;  // the model's vocabulary differs (its tokenizer's does not)
    }
    std::ofstream(dir / "config.json") << config.dump();
    std::ofstream(dir / "tokenizer.json") << tok.dump();
    auto draft = open_draft(dir, *target);
    ASSERT_FALSE(draft.ok()) << variant << ": a draft with another tokenizer was accepted";
    EXPECT_NE(draft.error().message.find("tokenizer"), std::string::npos) << draft.error().message;
    std::cout << "[ refused (" << variant << ") ] " << draft.error().message << "\n";
  }
}
