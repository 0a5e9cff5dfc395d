// memra-gen --spec from the outside: the real binary with a draft model (the Q8_0
// GGUF of the llama fixture drafting for its bf16 safetensors) gives the
// reference greedy ids of transformers, for plain and chat-free one-shot runs;
// --spec mtp and a --spec draft without --draft fail with clear messages.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "memra_gen_process.hpp"
#include "tests/support/fixtures.hpp"

namespace fs = std::filesystem;

namespace {

using memra::testing::join_ids;
const std::string& kGen = memra::testing::memra_gen_binary();
const std::string& kPluginDir = memra::testing::build_plugin_dir();
const fs::path kLlama = memra::testing::fixture("models/llama");
const fs::path kQ8 = memra::testing::fixture("gguf/llama/llama-Q8_0.gguf");

}  // namespace

TEST(EngineSpeculativeGen, DraftModelGivesTheReferenceGreedyIds) {
  if (!fs::exists(kLlama / "reference.json") || !fs::exists(kQ8)) GTEST_SKIP() << "fixtures absent";
  const auto ref = nlohmann::json::parse(std::ifstream(kLlama / "reference.json"));
  const auto input = ref["input_ids"].get<std::vector<int32_t>>();
  const auto greedy = ref["greedy_ids"].get<std::vector<int32_t>>();
  for (int k : {1, 4, 8}) {
    int status = 0;
    const std::string out = memra::testing::run_command(kGen + " " + kLlama.string() + " --backend cpu --plugin-dir " + kPluginDir + " --prompt-ids " +
                                    join_ids(input) + " --max-tokens " + std::to_string(greedy.size()) +
                                    " --json --spec draft --draft " + kQ8.string() + " --spec-k " + std::to_string(k) + " 2>/dev/null").take_out(status);
    ASSERT_EQ(status, 0) << out;
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["generated_ids"].get<std::vector<int32_t>>(), greedy) << "k=" << k;
    EXPECT_EQ(j["speculative"]["drafter"], "draft");
    EXPECT_GT(j["speculative"]["accepted"].get<int64_t>(), 0) << "k=" << k;
  }
}

TEST(EngineSpeculativeGen, MtpAndAMissingDraftAreRefusedClearly) {
  if (!fs::exists(kLlama)) GTEST_SKIP() << "fixtures absent";
  const std::string base = kGen + " " + kLlama.string() + " --backend cpu --plugin-dir " + kPluginDir + " --prompt-ids 1,2,3 ";
  int status = 0;
  std::string out = memra::testing::run_command(base + "--spec mtp 2>&1").take_out(status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("has no MTP head"), std::string::npos) << out;
  out = memra::testing::run_command(base + "--spec draft 2>&1").take_out(status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("--spec draft needs --draft"), std::string::npos) << out;
  out = memra::testing::run_command(base + "--spec bogus 2>&1").take_out(status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("ngram, draft or mtp"), std::string::npos) << out;
}
