// The speculative-decoding identity gates on the CUDA backend (the CPU suite,
// tests/engine/speculative_scheduler_test.cpp, runs the same gates from
// tests/engine/speculative_gates.hpp): the serving scheduler's output with
// speculation equals its output without, token for token and logprob for
// logprob, K = 1..8, greedy and seeded, alone and batched, for the n-gram drafter
// and for a draft model (llama-Q8_0.gguf drafting for the bf16 llama fixture,
// both on the GPU); a deliberately non-invariant verify step must fail the gate.
// The generation loop memra-gen and memra-bench use (generate_speculative) gets
// the same K = 1..8 greedy/seeded gate.
// Skips with the reason when there is no driver, GPU or CUDA build.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/generate.hpp"
#include "host/engine/text_model.hpp"
#include "tests/cuda/cuda_test_env.hpp"
#include "tests/engine/speculative_gates.hpp"

using namespace memra::spec_gates;

namespace {

memra::plugins::PluginHost& plugins() { return memra::cuda_test::build_plugins(); }

fs::path llama() { return memra::cuda_test::fixtures_dir() / "models/llama"; }
fs::path q8() { return memra::cuda_test::fixtures_dir() / "gguf/llama/llama-Q8_0.gguf"; }

EngineOptions options() {
  EngineOptions eo;
  eo.backend.kind = MEMRA_BACKEND_CUDA;
  eo.backend.module_path = memra::cuda_test::module_path();
  eo.max_context = 256;
  eo.max_sequences = 12;
  return eo;
}

std::unique_ptr<Engine> load_target() {
  auto src = open_model_source(llama().string(), plugins());
  EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  auto e = Engine::create(std::move(*src), plugins(), options());
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

std::unique_ptr<Engine> load_draft(const Engine& target) {
  auto tok = load_tokenizer(llama().string());
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  if (!tok) return nullptr;
  auto d = open_draft_engine(q8().string(), target, **tok, plugins(), options());
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return d ? std::move(*d) : nullptr;
}

std::vector<int32_t> base_prompt() {
  const auto ref = nlohmann::json::parse(std::ifstream(llama() / "reference.json"));
  return ref["input_ids"].get<std::vector<int32_t>>();
}

#define SKIP_WITHOUT_CUDA_OR_FIXTURES()                                                        \
  do {                                                                                         \
    const std::string why_ = memra::cuda_test::unavailable_reason();                           \
    if (!why_.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why_;                   \
    if (!fs::exists(llama() / "reference.json") || !fs::exists(q8()))                          \
      GTEST_SKIP() << "fixtures absent (" << llama() << ", " << q8() << ")";                    \
  } while (0)

}  // namespace

TEST(CudaSpeculative, NgramSchedulerOutputEqualsPlainForK1To8) {
  SKIP_WITHOUT_CUDA_OR_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  EXPECT_GT(identity_gate(*target, base_prompt(), [] { return ngram_factory(); }, "cuda ngram"), 0);
}

TEST(CudaSpeculative, DraftModelSchedulerOutputEqualsPlainForK1To8) {
  SKIP_WITHOUT_CUDA_OR_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto draft = load_draft(*target);
  ASSERT_TRUE(draft);
  EXPECT_GT(identity_gate(*target, base_prompt(), [&] { return draft_factory(*target, *draft); }, "cuda draft Q8_0"), 0);
}

TEST(CudaSpeculative, TheGatesCatchANonInvariantVerifyStep) {
  SKIP_WITHOUT_CUDA_OR_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto draft = load_draft(*target);
  ASSERT_TRUE(draft);
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), ngram_factory())) << "ngram";
  EXPECT_TRUE(gate_notices_non_invariance(*target, base_prompt(), draft_factory(*target, *draft))) << "draft model";
}

TEST(CudaSpeculative, FallbackSwitchingNeverChangesTokens) {
  SKIP_WITHOUT_CUDA_OR_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  for (bool sampled : {false, true}) {
    const auto reqs = requests(base_prompt(), sampled, 3, 40);
    const RunResult plain = run(*target, SchedulerOptions{.max_step_tokens = 512, .max_running = 1}, reqs, false);
    SchedulerOptions o = speculative(ngram_factory(), 4, true);
    o.spec_policy = {.adaptive = true, .verify_token_cost = 5.0, .warmup_steps = 1, .reprobe_after = 2, .smoothing = 0.25};
    const RunResult toggled = run(*target, o, reqs, true);
    expect_same(toggled, plain, sampled ? "toggling, seeded" : "toggling, greedy");
    EXPECT_GT(toggled.stats.spec_fallbacks, 1);
  }
}

TEST(CudaSpeculative, GenerationLoopEqualsPlainForK1To8) {
  SKIP_WITHOUT_CUDA_OR_FIXTURES();
  auto target = load_target();
  ASSERT_TRUE(target);
  auto draft = load_draft(*target);
  ASSERT_TRUE(draft);
  const std::vector<int32_t> prompt = base_prompt();
  for (bool sampled : {false, true}) {
    GenerateOptions g;
    g.max_tokens = 40;
    g.sampling.logprobs = true;
    g.sampling.temperature = 0.0f;
    if (sampled) {
      g.sampling.temperature = 0.5f;
      g.sampling.top_k = 2;
      g.sampling.top_p = 0.95f;
      g.sampling.seed = 77;
    }
    std::vector<float> plain_lp;
    auto plain = generate(*target, prompt, g, nullptr, [&](const TokenEvent& ev) {
      plain_lp.push_back(ev.logprob);
      return true;
    });
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    for (bool use_draft : {false, true}) {
      int64_t accepted = 0;
      for (int k = 1; k <= 8; ++k) {
        NgramDrafter ngram;
        DraftModelDrafter dm(*draft, draft_cost_estimate(*target, *draft));
        SpeculativeOptions s;
        s.drafter = use_draft ? static_cast<Drafter*>(&dm) : &ngram;
        s.k = k;
        s.policy.adaptive = false;
        std::vector<float> lp;
        auto spec = generate_speculative(*target, prompt, g, s, [&](const TokenEvent& ev) {
          lp.push_back(ev.logprob);
          return true;
        });
        ASSERT_TRUE(spec.ok()) << spec.error().message;
        const std::string what = std::string(use_draft ? "draft" : "ngram") + " k=" + std::to_string(k) + (sampled ? " seeded" : " greedy");
        EXPECT_EQ(spec->tokens, plain->tokens) << what;
        EXPECT_EQ(lp, plain_lp) << what;
        accepted += spec->accepted;
      }
      EXPECT_GT(accepted, 0) << (use_draft ? "draft" : "ngram") << (sampled ? " seeded" : " greedy");
    }
  }
}
