// Tokenizer accessors against tokenizer_config.json read independently, concurrent encoding (one word
// cache shared by the threads) against single-threaded results, and encode_at_most against encode.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "host/tokenizer/tokenizer.hpp"
#include "tests/tokenizer/oracle_support.hpp"

namespace memra::tokenizer::test {
namespace {

using json = nlohmann::json;

class TokenizerAccessors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerAccessors, MatchTokenizerConfig) {
  const ModelRef* m = find_model(GetParam());
  if (!m || !std::filesystem::exists(m->dir + "/tokenizer_config.json"))
    GTEST_SKIP() << GetParam() << " not installed; run scripts/setup";
  auto tok = load(*m);
  ASSERT_TRUE(tok);
  json cfg = json::parse(read_text(m->dir + "/tokenizer_config.json"));
  json tj = json::parse(read_text(m->dir + "/tokenizer.json"));
  auto id_of = [&](const json& v) -> std::optional<TokenId> {
    if (!v.is_string()) return std::nullopt;
    return tok->token_id(v.get<std::string>());
  };
  EXPECT_EQ(tok->bos_id(), id_of(cfg.value("bos_token", json())));
  EXPECT_EQ(tok->eos_id(), id_of(cfg.value("eos_token", json())));
  EXPECT_EQ(tok->pad_id(), id_of(cfg.value("pad_token", json())));
  EXPECT_EQ(tok->chat_template(), cfg.value("chat_template", std::string()));
  EXPECT_FALSE(tok->chat_template().empty());
  for (const auto& a : tj["added_tokens"]) {
    TokenId id = a["id"].get<TokenId>();
    EXPECT_EQ(tok->is_special(id), a["special"].get<bool>()) << a["content"];
    EXPECT_EQ(tok->token_text(id), a["content"].get<std::string>());
    EXPECT_EQ(tok->token_id(a["content"].get<std::string>()), id);
  }
  std::size_t max_id = 0;
  for (auto it = tj["model"]["vocab"].begin(); it != tj["model"]["vocab"].end(); ++it) {
    max_id = std::max<std::size_t>(max_id, it->get<std::size_t>());
    if (it->get<TokenId>() % 997 == 0) {
      EXPECT_EQ(tok->token_text(it->get<TokenId>()), it.key());
    }
  }
  for (const auto& a : tj["added_tokens"]) max_id = std::max<std::size_t>(max_id, a["id"].get<std::size_t>());
  EXPECT_EQ(tok->vocab_size(), max_id + 1);
  EXPECT_EQ(tok->token_text(-1), "");
  EXPECT_EQ(tok->token_text(static_cast<TokenId>(max_id + 1)), "");
  EXPECT_EQ(tok->decode(std::vector<TokenId>{-5, static_cast<TokenId>(max_id + 10)}), "");
}

TEST_P(TokenizerAccessors, ConcurrentEncodeMatchesSingleThread) {
  const ModelRef* m = find_model(GetParam());
  if (!m || !std::filesystem::exists(m->dir + "/tokenizer.json")) GTEST_SKIP() << GetParam() << " not installed";
  auto tok = load(*m);
  ASSERT_TRUE(tok);
  const auto& lines = corpus();
  std::vector<std::vector<TokenId>> want;
  for (const auto& l : lines) want.push_back(tok->encode(l));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (std::size_t i = 0; i < lines.size(); ++i) {
          std::size_t k = (i * 7 + static_cast<std::size_t>(t) * 13 + round) % lines.size();
          if (tok->encode(lines[k]) != want[k]) ++mismatches[t];
        }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST_P(TokenizerAccessors, EncodeAtMostIsEncodeOrStopsPastTheLimit) {
  const ModelRef* m = find_model(GetParam());
  if (!m || !std::filesystem::exists(m->dir + "/tokenizer.json")) GTEST_SKIP() << GetParam() << " not installed";
  auto tok = load(*m);
  ASSERT_TRUE(tok);
  for (bool special : {false, true}) {
    for (const auto& line : corpus()) {
      const std::vector<TokenId> all = tok->encode(line, special);
      EXPECT_EQ(tok->encode_at_most(line, special, all.size()), all) << line;
      EXPECT_EQ(tok->encode_at_most(line, special, all.size() + 100), all) << line;
      if (!all.empty()) EXPECT_EQ(tok->encode_at_most(line, special, all.size() - 1), std::nullopt) << line;
    }
  }
  // Texts far past the limit: many words, and one 8 MB word (its length alone rules it out).
  std::string words;
  for (int i = 0; i < 200000; ++i) words += "word" + std::to_string(i % 977) + " ";
  EXPECT_EQ(tok->encode_at_most(words, false, 1000), std::nullopt);
  EXPECT_EQ(tok->encode_at_most(std::string(8u << 20, 'a'), false, 1000), std::nullopt);
  const std::string word(100000, 'a');
  const std::vector<TokenId> ids = tok->encode(word, false);
  EXPECT_EQ(tok->encode_at_most(word, false, ids.size()), ids);
  EXPECT_EQ(tok->encode_at_most(word, false, ids.size() - 1), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerAccessors, ::testing::Values("qwen3", "llama3", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace memra::tokenizer::test
