// Encode and decode against the reference implementations, for every corpus line and every tokenizer:
// @lenml/tokenizers (transformers.js, always) and the Hugging Face `tokenizers` library (Rust, via its npm
// package, when installed). Streaming decode is checked against decode() on the same data.
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

#include "host/tokenizer/tokenizer.hpp"
#include "host/tokenizer/utf8.hpp"
#include "tests/tokenizer/oracle_support.hpp"

namespace memra::tokenizer::test {
namespace {

class TokenizerOracle : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    model_ = find_model(GetParam());
    if (!model_) GTEST_SKIP() << GetParam() << ": fixture not present in " << memra::testing::fixtures_dir();
    std::string why;
    oracle_ = oracle(why);
    if (!oracle_) GTEST_SKIP() << why;
    if (!model_->lenml_encode && !oracle_->have_hf)
      GTEST_SKIP() << model_->name << " is only checked against the Hugging Face `tokenizers` npm package, which "
                   << "is not installed (add \"tokenizers\" to tests/node/package.json or set "
                      "MEMRA_HF_TOKENIZERS_DIR to a node_modules holding it)";
  }
  // Loaded on first use, so tests that skip do not pay for it.
  const Tokenizer& tok() {
    if (!tok_) tok_ = load(*model_);
    if (!tok_) throw std::runtime_error("cannot load " + model_->name);
    return *tok_;
  }
  std::shared_ptr<const Tokenizer> shared_tok() {
    tok();
    return tok_;
  }
  const ModelRef* model_ = nullptr;
  const Oracle* oracle_ = nullptr;
  std::shared_ptr<const Tokenizer> tok_;
};

constexpr int kMaxReported = 12;

TEST_P(TokenizerOracle, EncodeMatchesReference) {
  const auto& texts = oracle_->texts;
  int failures = 0, compared = 0;
  auto check = [&](const char* who, const std::vector<Row>& ref) {
    ASSERT_EQ(ref.size(), texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      auto ids = tok().encode(texts[i], true);
      auto plain = tok().encode(texts[i], false);
      ++compared;
      if (ids != ref[i].ids && failures++ < kMaxReported)
        ADD_FAILURE() << who << " line " << i << " " << show(texts[i]) << "\n  memra: " << show(ids)
                      << "\n  ref:   " << show(ref[i].ids);
      if (plain != ref[i].ids_plain && failures++ < kMaxReported)
        ADD_FAILURE() << who << " (no special tokens) line " << i << " " << show(texts[i])
                      << "\n  memra: " << show(plain) << "\n  ref:   " << show(ref[i].ids_plain);
    }
  };
  if (model_->lenml_encode) check("@lenml/tokenizers", oracle_->lenml.at(model_->name));
  if (oracle_->have_hf) check("HF tokenizers", oracle_->hf.at(model_->name));
  EXPECT_EQ(failures, 0) << failures << " mismatches over " << compared << " lines";
}

// Pseudo-random texts built from pieces that stress the splitting rules (special-token fragments, mixed
// scripts, combining marks, whitespace kinds). transformers.js's regex \s is JavaScript's (it includes
// U+FEFF and not U+0085) while the HF library's is Unicode White_Space, like memra's: texts with those two
// characters are compared with the HF library only.
TEST_P(TokenizerOracle, FuzzTextsEncodeLikeReference) {
  const auto& rows = oracle_->fuzz.at(model_->name);
  int failures = 0, lenml_compared = 0;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    auto ids = tok().encode(r.text, true);
    bool js_whitespace_differs =
        r.text.find("\xC2\x85") != std::string::npos || r.text.find("\xEF\xBB\xBF") != std::string::npos;
    if (model_->lenml_encode && !js_whitespace_differs) {
      ++lenml_compared;
      if (ids != r.lenml && failures++ < kMaxReported)
        ADD_FAILURE() << "@lenml/tokenizers fuzz #" << k << " " << show(r.text) << "\n  memra: " << show(ids)
                      << "\n  ref:   " << show(r.lenml);
    }
    if (oracle_->have_hf && ids != r.hf && failures++ < kMaxReported)
      ADD_FAILURE() << "HF tokenizers fuzz #" << k << " " << show(r.text) << "\n  memra: " << show(ids)
                    << "\n  ref:   " << show(r.hf);
  }
  EXPECT_EQ(failures, 0);
  if (model_->lenml_encode) {
    EXPECT_GT(lenml_compared, static_cast<int>(rows.size()) / 2);
  }
}

TEST_P(TokenizerOracle, DecodeMatchesReference) {
  if (!model_->lenml_decode && !oracle_->have_hf)
    GTEST_SKIP() << "decoding of " << model_->name << " is only checked against the HF library (not installed)";
  const auto& texts = oracle_->texts;
  int failures = 0, round_trips = 0;
  auto expect = [&](const std::string& what, std::size_t i, const std::string& got, const std::string& want) {
    if (got != want && failures++ < kMaxReported)
      ADD_FAILURE() << what << " line " << i << " " << show(texts[i]) << "\n  memra: " << show(got)
                    << "\n  ref:   " << show(want);
  };
  // transformers.js applies the config's clean_up_tokenization_spaces; the Rust library never does.
  const DecodeOptions plain{}, skip{true, std::nullopt}, raw{false, false}, raw_skip{true, false};
  if (model_->lenml_decode) {
    const auto& ref = oracle_->lenml.at(model_->name);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      expect("lenml decode", i, tok().decode(ref[i].ids, plain), ref[i].decode);
      expect("lenml decode skip_special_tokens", i, tok().decode(ref[i].ids, skip), ref[i].decode_skip);
      expect("lenml decode (no specials)", i, tok().decode(ref[i].ids_plain, plain), ref[i].decode_plain);
      // Round trip wherever the reference round-trips.
      if (ref[i].decode_plain == texts[i]) {
        ++round_trips;
        expect("round trip", i, tok().decode(tok().encode(texts[i], false), plain), texts[i]);
      }
    }
  }
  if (oracle_->have_hf) {
    const auto& ref = oracle_->hf.at(model_->name);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      expect("HF decode", i, tok().decode(ref[i].ids, raw), ref[i].decode);
      expect("HF decode skip_special_tokens", i, tok().decode(ref[i].ids, raw_skip), ref[i].decode_skip);
      expect("HF decode (no specials)", i, tok().decode(ref[i].ids_plain, raw), ref[i].decode_plain);
    }
  }
  EXPECT_EQ(failures, 0);
  if (model_->lenml_decode) {
    EXPECT_GT(round_trips, 0) << "no corpus line round-trips in the reference";
  }
}

// Pseudo-random id sequences (invalid UTF-8, byte-fallback runs, special tokens) decode like the reference.
TEST_P(TokenizerOracle, RandomIdsDecodeMatchesReference) {
  const auto& rows = oracle_->random.at(model_->name);
  if (!model_->lenml_random && !oracle_->have_hf)
    GTEST_SKIP() << "@lenml/tokenizers decodes invalid byte-fallback runs differently from the HF library, "
                    "which is not installed";
  int failures = 0;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const auto& r = rows[k];
    auto check = [&](const char* what, const std::string& got, const std::string& want) {
      if (got != want && failures++ < kMaxReported)
        ADD_FAILURE() << what << " #" << k << " " << show(r.ids) << "\n  memra: " << show(got)
                      << "\n  ref:   " << show(want);
    };
    if (model_->lenml_random && model_->lenml_decode) {
      check("lenml", tok().decode(r.ids), r.lenml);
      check("lenml skip", tok().decode(r.ids, {true, std::nullopt}), r.lenml_skip);
    }
    if (oracle_->have_hf) {
      check("HF", tok().decode(r.ids, {false, false}), r.hf);
      check("HF skip", tok().decode(r.ids, {true, false}), r.hf_skip);
    }
  }
  EXPECT_EQ(failures, 0);
}

// The streaming decoder, fed one id at a time or in random chunks, returns valid UTF-8 pieces whose
// concatenation is decode() of all ids — for every corpus line and every random sequence, with and without
// skip_special_tokens and clean-up.
TEST_P(TokenizerOracle, StreamingDecodeEqualsDecode) {
  std::vector<std::vector<TokenId>> seqs;
  for (const auto& t : oracle_->texts) seqs.push_back(tok().encode(t, true));
  for (const auto& r : oracle_->random.at(model_->name)) seqs.push_back(r.ids);
  std::mt19937 rng(7);
  const DecodeOptions option_sets[] = {{false, std::nullopt}, {true, std::nullopt}, {false, true}, {true, false}};
  int failures = 0, pieces = 0;
  for (const auto& opts : option_sets) {
    StreamDecoder stream(shared_tok(), opts);
    for (std::size_t k = 0; k < seqs.size(); ++k) {
      const auto& ids = seqs[k];
      const std::string whole = tok().decode(ids, opts);
      // one id at a time
      std::string joined;
      for (TokenId id : ids) {
        std::string piece = stream.push(id);
        ++pieces;
        if (!detail::is_valid_utf8(piece) && failures++ < kMaxReported)
          ADD_FAILURE() << "stream emitted invalid UTF-8 " << show(piece) << " for " << show(ids);
        joined += piece;
      }
      joined += stream.finish();
      if (joined != whole && failures++ < kMaxReported)
        ADD_FAILURE() << "stream (1 by 1) #" << k << " skip=" << opts.skip_special_tokens << " " << show(ids)
                      << "\n  stream: " << show(joined) << "\n  decode: " << show(whole);
      // random chunks
      joined.clear();
      for (std::size_t i = 0; i < ids.size();) {
        std::size_t n = std::min<std::size_t>(ids.size() - i, 1 + rng() % 5);
        joined += stream.push(std::span<const TokenId>(ids.data() + i, n));
        i += n;
      }
      joined += stream.finish();
      if (joined != whole && failures++ < kMaxReported)
        ADD_FAILURE() << "stream (chunks) #" << k << " " << show(ids) << "\n  stream: " << show(joined)
                      << "\n  decode: " << show(whole);
    }
  }
  EXPECT_EQ(failures, 0) << "over " << pieces << " pushes";
}

std::vector<std::string> model_names() {
  return {"qwen3",         "llama3",           "gemma3",     "tiny",        "gemma3_llama2", "gemma3_metaspace",
          "gemma3_metaspace_split", "qwen3_gpt2", "qwen3_split", "qwen3_flags"};
}

INSTANTIATE_TEST_SUITE_P(Models, TokenizerOracle, ::testing::ValuesIn(model_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace memra::tokenizer::test
