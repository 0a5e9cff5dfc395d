// The speculative-decoding identity gate on the CPU backend: for K = 1..8, greedy
// and seeded sampling, speculative decoding with the n-gram drafter yields exactly
// the tokens and logprobs of plain decode — and the gate has teeth: a verify step
// whose logits differ from single-token steps (a non-invariant kernel) is caught.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/generate.hpp"
#include "tests/engine/test_plugins.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;

namespace {

const fs::path kLlama = fs::path(MEMRA_FIXTURES_DIR) / "models/llama";

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

}  // namespace

TEST(EngineSpeculative, NgramIsTokenIdenticalToPlainDecodeForK1To8) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto src = open_model_source(kLlama.string());
  ASSERT_TRUE(src.ok());
  auto engine = Engine::create(std::move(*src), test_plugins(), {});
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const auto ref = nlohmann::json::parse(std::ifstream(kLlama / "reference.json"));
  const auto prompt = ref["input_ids"].get<std::vector<int32_t>>();
  for (bool sampled : {false, true}) {
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
    const Outcome plain = run_generation(**engine, prompt, g, nullptr);
    ASSERT_EQ(plain.tokens.size(), 40u);
    int64_t accepted_total = 0;
    for (int k = 1; k <= 8; ++k) {
      NgramDrafter drafter;
      SpeculativeOptions s{&drafter, k, nullptr};
      const Outcome spec = run_generation(**engine, prompt, g, &s);
      EXPECT_EQ(spec.tokens, plain.tokens) << "k=" << k << (sampled ? " sampled" : " greedy");
      EXPECT_EQ(spec.logprobs, plain.logprobs) << "k=" << k;
      EXPECT_LE(spec.accepted, spec.drafted);
      accepted_total += spec.accepted;
    }
    // The random model repeats itself, so prompt lookup must have been right sometimes.
    EXPECT_GT(accepted_total, 0) << (sampled ? "sampled" : "greedy");
  }
  EXPECT_EQ((*engine)->kv_blocks().num_free(), (*engine)->kv_blocks().num_blocks()) << "rollback leaked KV blocks";
}

TEST(EngineSpeculative, TheGateCatchesANonInvariantVerifyStep) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  auto src = open_model_source(kLlama.string());
  ASSERT_TRUE(src.ok());
  auto engine = Engine::create(std::move(*src), test_plugins(), {});
  ASSERT_TRUE(engine.ok());
  const auto ref = nlohmann::json::parse(std::ifstream(kLlama / "reference.json"));
  const auto prompt = ref["input_ids"].get<std::vector<int32_t>>();
  GenerateOptions g;
  g.max_tokens = 40;
  g.sampling.temperature = 0.0f;
  const Outcome plain = run_generation(**engine, prompt, g, nullptr);
  // Inject a kernel that is not batch invariant: rows after the first of a multi-token
  // verify step come out different from what a one-token step computes.
  NgramDrafter drafter;
  SpeculativeOptions s{&drafter, 4, [](std::vector<std::vector<float>>& rows) {
                         for (size_t i = 1; i < rows.size(); ++i) rows[i][(memra::engine::argmax(rows[i]) + 1) % rows[i].size()] += 50.0f;
                       }};
  const Outcome broken = run_generation(**engine, prompt, g, &s);
  EXPECT_NE(broken.tokens, plain.tokens) << "the identity gate did not notice a non-invariant verify step";
}
