// memra-gen from the outside: the real binary on every transformers fixture model
// it can load, checked against the reference greedy ids and logits.
#include <gtest/gtest.h>

#include "tests/support/logits.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "memra_gen_process.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

using memra::testing::join_ids;
const std::string& kGen = memra::testing::memra_gen_binary();
const std::string& kPluginDir = memra::testing::build_plugin_dir();

}  // namespace

class MemraGen : public ::testing::TestWithParam<std::string> {};

TEST_P(MemraGen, GreedyIdsAndDumpedLogitsMatchTransformers) {
  const fs::path dir = memra::testing::fixture("models/" + GetParam());
  if (!fs::exists(dir / "reference.json")) GTEST_SKIP() << "fixture " << dir << " absent";
  const auto ref = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  const auto input = ref["input_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy_ids"].get<std::vector<int32_t>>();
  const memra::testing::TempDir tmp("memra-gen-dump");
  const fs::path dump = tmp / "logits.f32";
  int status = 0;
  const std::string out = memra::testing::run_command(kGen + " " + dir.string() + " --plugin-dir " + kPluginDir + " --prompt-ids " + join_ids(input) +
                                  " --max-tokens " + std::to_string(greedy.size()) + " --json --dump-logits " + dump.string() +
                                  " 2>/dev/null").take_out(status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), input);
  EXPECT_EQ(j["generated_ids"].get<std::vector<int32_t>>(), greedy);
  ASSERT_EQ(j["steps"].size(), greedy.size());
  EXPECT_EQ(j["steps"][0]["top_logprobs"][0]["id"].get<int32_t>(), greedy[0]);

  // The dump holds [prompt positions + generated steps][vocab] float32.
  const size_t vocab = 1024;
  std::ifstream f(dump, std::ios::binary);
  std::vector<float> got((input.size() + greedy.size()) * vocab);
  f.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * sizeof(float)));
  ASSERT_TRUE(f.good());
  std::ifstream r(dir / "reference.bin", std::ios::binary);
  std::vector<float> want(2 * 24 * vocab);
  r.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * sizeof(float)));
  // Prompt rows vs prefill_logits; generated rows vs greedy_step_logits (same layout);
  // bf16 weights on bf16 activations (logits.hpp).
  double worst = 0;
  for (size_t row = 0; row < got.size() / vocab; ++row)
    worst = std::max(worst, memra::testing::max_rel_diff(got.data() + row * vocab, want.data() + row * vocab, vocab));
  EXPECT_LT(worst, memra::testing::kBf16ActivationBound);
}

INSTANTIATE_TEST_SUITE_P(Models, MemraGen, ::testing::Values("llama", "qwen3"));

TEST(MemraGenCli, HelpAndUsageErrors) {
  int status = 0;
  const std::string help = memra::testing::run_command(kGen + " --help 2>&1").take_out(status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(help.find("--prompt-ids"), std::string::npos);
  const std::string none = memra::testing::run_command(kGen + " 2>&1").take_out(status);
  EXPECT_NE(status, 0);
  EXPECT_NE(none.find("MODEL"), std::string::npos) << none;
  const std::string missing = memra::testing::run_command(kGen + " /nonexistent/model --prompt hi 2>&1").take_out(status);
  EXPECT_NE(status, 0);
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
}

// A bad number names its flag, what it takes and what it got, and exits 64 (usage) before any
// model is read (the model path does not exist: a number error must come first).
TEST(MemraGenCli, BadNumbersAreNamedWithTheirFlag) {
  const std::pair<std::string, std::string> cases[] = {
      {"--max-tokens -1", "--max-tokens needs an integer from 1 to 2147483647; got '-1'"},
      {"--max-tokens 12x", "--max-tokens needs an integer from 1 to"},
      {"--temperature warm", "--temperature needs a number from 0 to"},
      {"--top-p 1.5", "--top-p needs a number from 0 to 1; got '1.5'"},
      {"--seed -3", "--seed needs an integer from 0 to"},
      {"--pp 0", "--pp needs an integer from 1 to 64; got '0'"},
      {"--prompt-ids 1,two,3", "--prompt-ids needs an integer from 0 to"},
  };
  for (const auto& [args, want] : cases) {
    SCOPED_TRACE(args);
    int status = 0;
    const std::string mode = args.rfind("--prompt-ids", 0) == 0 ? "" : "--prompt hi ";
    const std::string out = memra::testing::run_command(kGen + " /nonexistent/model " + mode + "--backend cpu " + args + " 2>&1").take_out(status);
    EXPECT_EQ(status, 64) << out;
    EXPECT_NE(out.find("memra-gen: " + want), std::string::npos) << out;
    EXPECT_EQ(out.find("stoi"), std::string::npos) << out;
  }
}

TEST(MemraGenCli, SpeculativeNgramGivesTheReferenceGreedyIds) {
  const fs::path dir = memra::testing::fixture("models/llama");
  if (!fs::exists(dir / "reference.json")) GTEST_SKIP() << "fixture " << dir << " absent";
  const auto ref = nlohmann::json::parse(std::ifstream(dir / "reference.json"));
  const auto input = ref["input_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy_ids"].get<std::vector<int32_t>>();
  for (int k : {1, 3, 8}) {
    int status = 0;
    const std::string out = memra::testing::run_command(kGen + " " + dir.string() + " --plugin-dir " + kPluginDir + " --prompt-ids " + join_ids(input) +
                                    " --max-tokens " + std::to_string(greedy.size()) + " --json --spec ngram --spec-k " +
                                    std::to_string(k) + " 2>/dev/null").take_out(status);
    ASSERT_EQ(status, 0) << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["generated_ids"].get<std::vector<int32_t>>(), greedy) << "k=" << k;
    EXPECT_GT(j["speculative"]["accepted"].get<int64_t>(), 0) << "k=" << k;
  }
}
