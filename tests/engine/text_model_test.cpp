// The model's text side as the engine loads it: a tokenizer built from a GGUF's
// embedded vocabulary (tokenizer.ggml.*) gives the same ids as the same model's
// tokenizer.json on the whole tokenizer corpus, and memra-tokenize prints what the
// library computes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/engine/text_model.hpp"
#include "repack/tool/repack.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/command.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = memra::testing::fixtures_dir();

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  std::ifstream f(fs::path(MEMRA_SOURCE_ROOT) / "tests/tokenizer/corpus.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    // Lines holding lone UTF-16 surrogates have no UTF-8 form; the tokenizer's own
    // oracle test covers them, here they are skipped.
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_string()) lines.push_back(j.get<std::string>());
  }
  return lines;
}

// The tool's stdout; *status its exit code.
std::string run(const std::string& cmd, int* status) { return memra::testing::run_command(cmd).take_out(*status); }

}  // namespace

class TextModelGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(TextModelGguf, EmbeddedVocabularyEncodesLikeTokenizerJson) {
  const fs::path gguf = kFixtures / "gguf/llama" / ("llama-" + GetParam() + ".gguf");
  if (!fs::exists(gguf)) GTEST_SKIP() << "fixture " << gguf << " absent";
  auto from_gguf = memra::engine::load_tokenizer(gguf.string());
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().message;
  auto from_json = memra::engine::load_tokenizer((kFixtures / "models/llama").string());
  ASSERT_TRUE(from_json.ok()) << from_json.error().message;
  const auto lines = corpus();
  ASSERT_GT(lines.size(), 100u);
  for (const std::string& text : lines) {
    for (bool special : {true, false}) {
      const auto a = (*from_gguf)->encode(text, special);
      const auto b = (*from_json)->encode(text, special);
      ASSERT_EQ(a, b) << "text: " << text << " special " << special;
      EXPECT_EQ((*from_gguf)->decode(a), (*from_json)->decode(b)) << text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, TextModelGguf, ::testing::Values("BF16", "Q8_0", "Q4_K_M", "IQ4_XS"));

TEST(MemraTokenize, PrintsWhatTheLibraryComputes) {
  const fs::path model = fs::path(MEMRA_SOURCE_ROOT) / "host/default_model";
  auto tok = memra::engine::load_tokenizer(model.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  int status = 0;
  const std::string bin = MEMRA_TOKENIZE_BINARY;
  const std::string out = run(bin + " " + model.string() + " --text 'Hello <|im_start|> world' 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), (*tok)->encode("Hello <|im_start|> world", true));
  EXPECT_EQ(j["count"].get<size_t>(), j["ids"].size());

  const memra::testing::TempDir tmp("memra-tokenize-chat");
  const fs::path chat = tmp.write("chat.json", R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]})");
  const std::string rendered = run(bin + " " + model.string() + " --chat-json " + chat.string() + " 2>&1", &status);
  ASSERT_EQ(status, 0) << rendered;
  const auto r = nlohmann::json::parse(rendered);
  EXPECT_EQ(r["prompt"].get<std::string>(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(r["ids"].get<std::vector<int32_t>>(), (*tok)->encode(r["prompt"].get<std::string>(), false));

  run(bin + " " + model.string() + " 2>&1", &status);
  EXPECT_EQ(status, 2);
  run(bin + " " + model.string() + " --text a --bogus 2>&1", &status);
  EXPECT_EQ(status, 2);
  const std::string missing = run(bin + " /nonexistent --text a 2>&1", &status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
}

TEST(TextModelMemra, RepackOfAGgufKeepsItsTokenizer) {
  const fs::path gguf = kFixtures / "gguf/llama/llama-Q8_0.gguf";
  if (!fs::exists(gguf)) GTEST_SKIP() << "fixture " << gguf << " absent";
  const memra::testing::TempDir tmp("memra-text-model");
  const fs::path out = tmp / "llama-Q8_0.memra";
  memra::repack::RepackOptions ro;
  ro.plugins = &memra::testing::build_plugins();
  ro.source = gguf;
  ro.output = out;
  ro.fsync = false;
  auto r = memra::repack::repack_checkpoint(ro);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto from_memra = memra::engine::load_tokenizer(out.string());
  ASSERT_TRUE(from_memra.ok()) << from_memra.error().message;
  auto from_gguf = memra::engine::load_tokenizer(gguf.string());
  ASSERT_TRUE(from_gguf.ok());
  for (const std::string& text : corpus()) EXPECT_EQ((*from_memra)->encode(text), (*from_gguf)->encode(text)) << text;
}
