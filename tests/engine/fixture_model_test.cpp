// Oracle: the engine on the CPU reference backend against transformers' float32
// reference (fixtures made from the bf16 checkpoints reloaded as float32) and
// against llama.cpp's error budget on its quantized GGUF files.
//
// Bound for the float32 path: for every position, max |memra - ref| <= 1e-4 * max |ref|
// of that row (a relative bound on the row's scale). Both sides compute in float32
// from the same exactly-upcast weights; only the summation order differs, which
// moves logits by ~1e-6 of their scale, so 1e-4 leaves a wide margin while still
// catching any real mistake (a missing norm, a wrong RoPE pair, a bias) that moves
// logits by percent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using memra::engine::Engine;

namespace {

const fs::path kFixtures = MEMRA_FIXTURES_DIR;

using memra::testing::max_rel_diff;
using memra::testing::read_f32;

std::unique_ptr<Engine> load(const fs::path& path) { return memra::testing::open_engine(path); }

// Prefill logits at every position and 24 greedy steps against the reference.
void check_against_transformers(const std::string& model) {
  const fs::path dir = kFixtures / "models" / model;
  if (!memra::testing::has_reference(dir)) GTEST_SKIP() << "fixture " << dir << " absent (expects ../shared/fixtures)";
  const memra::testing::TransformersReference ref = memra::testing::read_reference(dir);
  const std::vector<int32_t>& input = ref.input_ids;
  const std::vector<int32_t>& greedy = ref.greedy_ids;
  const size_t vocab = ref.vocab;

  auto engine = load(dir);
  ASSERT_TRUE(engine);
  const int32_t seq = engine->open_sequence();
  memra::engine::StepRequest req{seq, input, true};
  auto out = engine->step({&req, 1});
  ASSERT_TRUE(out.ok()) << out.error().message;
  ASSERT_EQ(out->size(), input.size());
  double worst = 0;
  for (size_t i = 0; i < input.size(); ++i) worst = std::max(worst, max_rel_diff((*out)[i], ref.prefill.data() + i * vocab, vocab));
  EXPECT_LE(worst, 1e-4) << model << ": prefill logits differ from transformers";
  std::cout << "[ " << model << " ] prefill max rel diff " << worst << "\n";

  // Greedy decode, one token per step, comparing each step's logits too.
  std::vector<int32_t> produced;
  std::vector<float> last = (*out).back();
  double worst_step = 0;
  for (size_t s = 0; s < greedy.size(); ++s) {
    worst_step = std::max(worst_step, max_rel_diff(last, ref.steps.data() + s * vocab, vocab));
    const int32_t tok = memra::engine::argmax(last);
    produced.push_back(tok);
    memra::engine::StepRequest d{seq, {&produced.back(), 1}, false};
    auto o = engine->step({&d, 1});
    ASSERT_TRUE(o.ok()) << o.error().message;
    last = (*o)[0];
  }
  EXPECT_EQ(produced, greedy) << model << ": greedy continuation differs";
  EXPECT_LE(worst_step, 1e-4) << model << ": decode-step logits differ from transformers";
  std::cout << "[ " << model << " ] decode max rel diff " << worst_step << "\n";
}

}  // namespace

TEST(EngineFixture, LlamaMatchesTransformers) { check_against_transformers("llama"); }
TEST(EngineFixture, Qwen3MatchesTransformers) { check_against_transformers("qwen3"); }

// Quantized GGUFs made by llama.cpp from the same llama model: memra's error against
// the transformers float32 reference must be no worse than llama.cpp's own error on
// the same file (gguf/llama/llamacpp_vs_hf.json, its CPU run), by rmse over every
// prefill position and by top-1 agreement.
class EngineGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineGguf, NoWorseThanLlamaCpp) {
  const std::string type = GetParam();
  const fs::path gguf = kFixtures / "gguf/llama" / ("llama-" + type + ".gguf");
  const fs::path ref_dir = kFixtures / "models/llama";
  if (!fs::exists(gguf) || !fs::exists(ref_dir / "reference.json")) GTEST_SKIP() << "fixture " << gguf << " absent";
  const auto ref = nlohmann::json::parse(std::ifstream(ref_dir / "reference.json"));
  const auto budget = nlohmann::json::parse(std::ifstream(kFixtures / "gguf/llama/llamacpp_vs_hf.json"))["llama-" + type + ".ngl0"]["prefill_vs_hf"];
  const std::vector<int32_t> input = ref["input_ids"].get<std::vector<int32_t>>();
  const size_t vocab = 1024;
  const auto prefill = read_f32(ref_dir / "reference.bin", 0, input.size() * vocab);

  auto engine = load(gguf);
  ASSERT_TRUE(engine);
  const int32_t seq = engine->open_sequence();
  memra::engine::StepRequest req{seq, input, true};
  auto out = engine->step({&req, 1});
  ASSERT_TRUE(out.ok()) << out.error().message;
  double se = 0;
  int top1 = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    const float* r = prefill.data() + i * vocab;
    for (size_t v = 0; v < vocab; ++v) se += std::pow((*out)[i][v] - r[v], 2.0);
    top1 += memra::engine::argmax((*out)[i]) == memra::engine::argmax(std::span<const float>(r, vocab));
  }
  const double rmse = std::sqrt(se / static_cast<double>(input.size() * vocab));
  std::cout << "[ " << type << " ] memra rmse " << rmse << " (llama.cpp " << budget["rmse"].get<double>() << "), top1 "
            << top1 << "/" << input.size() << " (llama.cpp " << budget["top1_agree"].get<int>() << ")\n";
  EXPECT_LE(rmse, budget["rmse"].get<double>());
  EXPECT_GE(top1, budget["top1_agree"].get<int>());
}

INSTANTIATE_TEST_SUITE_P(Types, EngineGguf, ::testing::Values("BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS"));
