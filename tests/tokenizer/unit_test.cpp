// Unit tests of the tokenizer's building blocks, each against an independent oracle: the WHATWG / Unicode
// "maximal subpart" rule for lossy UTF-8, the whole-text function for the streaming stages, PCRE2 itself
// for the regex translation, and hand-checked tokenizer.json snippets for added-token flags and errors.
#include <gtest/gtest.h>

#include <random>

#include "host/tokenizer/decoder.hpp"
#include "host/tokenizer/regex.hpp"
#include "host/tokenizer/tokenizer.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer {
namespace {

using detail::sanitize_utf8;

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(TokenizerUtf8, LossyDecodingFollowsMaximalSubparts) {
  // Cases from the Unicode standard's "U+FFFD substitution of maximal subparts" table.
  EXPECT_EQ(sanitize_utf8("abc"), "abc");
  EXPECT_EQ(sanitize_utf8("\xC3\xA9"), "\xC3\xA9");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), R);                 // truncated 4-byte sequence: one U+FFFD
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98x"), R + "x");
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), R + R);                 // overlong lead
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), R + R + R);         // surrogate
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), R + R + R + R);  // beyond U+10FFFF
  EXPECT_EQ(sanitize_utf8("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), R + R + R + R + "A");
  EXPECT_EQ(sanitize_utf8("\x80\xBF"), R + R);
  EXPECT_TRUE(detail::is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(detail::is_valid_utf8("\xF0\x9F\x98"));
  EXPECT_FALSE(detail::is_valid_utf8("\xED\xA0\x80"));
}

TEST(TokenizerUtf8, StreamingDecoderIsChunkingInvariant) {
  std::mt19937 rng(1);
  const unsigned char alphabet[] = {'a', 0x80, 0xBF, 0xC2, 0xC3, 0xA9, 0xE0, 0xA0, 0xED, 0x9F, 0xF0, 0x9F, 0x98, 0xF4, 0x8F, 0xFF};
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    for (int i = 0, n = 1 + rng() % 12; i < n; ++i) bytes += static_cast<char>(alphabet[rng() % sizeof alphabet]);
    std::string whole = sanitize_utf8(bytes), pieces;
    detail::Utf8StreamDecoder d;
    for (std::size_t i = 0; i < bytes.size();) {
      std::size_t n = 1 + rng() % 3;
      std::string out;
      d.feed(std::string_view(bytes).substr(i, n), out);
      EXPECT_TRUE(detail::is_valid_utf8(out));
      pieces += out;
      i += n;
    }
    d.flush(pieces);
    ASSERT_EQ(pieces, whole) << round;
    ASSERT_TRUE(detail::is_valid_utf8(whole));
  }
}

bool full_match(const std::string& hf_pattern, const std::string& text) {
  auto re = detail::Regex::compile_hf(hf_pattern);
  EXPECT_TRUE(re) << re.error().message;
  std::size_t b = 0, e = 0;
  return (*re)->find(text, 0, b, e) && b == 0 && e == text.size();
}

TEST(TokenizerRegex, WhitespaceIsUnicodeWhiteSpace) {
  // Oniguruma's \s as the HF library runs it: U+0085 yes, U+FEFF and U+180E no (not White_Space).
  for (const char* ws : {" ", "\t", "\n", "\r", "\x0B", "\x0C", "\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8"})
    EXPECT_TRUE(full_match("\\s", ws)) << ws;
  for (const char* ns : {"\xEF\xBB\xBF", "\xE1\xA0\x8E", "x", "\xE2\x80\x8B"}) EXPECT_FALSE(full_match("\\s", ns));
  EXPECT_TRUE(full_match("[^\\s\\p{L}]+", "\xEF\xBB\xBF!"));
  EXPECT_FALSE(full_match("[^\\s\\p{L}]+", "\xC2\x85!"));
  EXPECT_TRUE(full_match("\\S+", "a\xEF\xBB\xBF"));
}

TEST(TokenizerRegex, CaseInsensitiveGroupsAreAsciiOnly) {
  const std::string contraction = "(?i:'s|'t|'re|'ve|'m|'ll|'d)";
  for (const char* s : {"'s", "'S", "'LL", "'Re", "'d"}) EXPECT_TRUE(full_match(contraction, s)) << s;
  EXPECT_FALSE(full_match(contraction, "'\xC5\xBF"));  // long s: PCRE2 caseless would fold it, HF does not
  auto t = detail::translate_hf_regex("(?i:ab)c[x-z]\\u00e9");
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "(?:[aA][bB])c[x-z]\\x{00e9}");
}

TEST(TokenizerRegex, ReportsWhatItCannotTranslate) {
  EXPECT_FALSE(detail::translate_hf_regex("[\\S]"));
  EXPECT_FALSE(detail::translate_hf_regex("(?m)x"));
  EXPECT_FALSE(detail::Regex::compile_hf("(unclosed"));
}

// Random text over the characters the clean-up rules look at, split into random chunks.
std::string random_cleanup_text(std::mt19937& rng) {
  static const char alphabet[] = " ' ntmsvre.,!?x";
  std::string s;
  for (int i = 0, n = rng() % 24; i < n; ++i) s += alphabet[rng() % (sizeof alphabet - 1)];
  return s;
}

TEST(TokenizerCleanup, StreamingEqualsWholeText) {
  EXPECT_EQ(detail::clean_up_tokenization("a . b , c ! d ? I ' m do n't he 's we 've they 're don 't"),
            "a. b, c! d? I'm don't he's we've they're don 't");
  EXPECT_EQ(detail::clean_up_tokenization("x n ' t"), "xn't");  // " ' " first, then " n't"
  std::mt19937 rng(3);
  for (int round = 0; round < 20000; ++round) {
    std::string text = random_cleanup_text(rng), out;
    detail::CleanupStream stream;
    for (std::size_t i = 0; i < text.size();) {
      std::size_t n = 1 + rng() % 4;
      stream.push(std::string_view(text).substr(i, n), out);
      i += n;
    }
    stream.finish(out);
    ASSERT_EQ(out, detail::clean_up_tokenization(text)) << "\"" << text << "\"";
  }
}

TEST(TokenizerStrip, StreamingEqualsWholeText) {
  // The stage receives whole characters; chunks are cut between characters.
  const char* chars[] = {" ", " ", "a", "b", "\xE2\x96\x81"};
  std::mt19937 rng(4);
  for (int round = 0; round < 5000; ++round) {
    std::vector<std::string> text_chars;
    for (int i = 0, n = rng() % 10; i < n; ++i) text_chars.push_back(chars[rng() % 5]);
    std::string text;
    for (const auto& c : text_chars) text += c;
    int start = rng() % 3, stop = rng() % 3;
    std::string out;
    detail::StripStream stream(U' ', start, stop);
    for (std::size_t i = 0; i < text_chars.size();) {
      std::size_t n = std::min<std::size_t>(text_chars.size() - i, 1 + rng() % 3);
      std::string chunk;
      for (std::size_t k = i; k < i + n; ++k) chunk += text_chars[k];
      stream.push(chunk, out);
      i += n;
    }
    stream.finish(out);
    ASSERT_EQ(out, detail::strip_text(text, U' ', start, stop)) << "\"" << text << "\" " << start << " " << stop;
  }
}

// A tiny byte-level tokenizer.json: every byte is a token (GPT-2 byte alphabet), one merge, and added
// tokens exercising the lstrip / rstrip / single_word flags (semantics of the HF AddedVocabulary).
std::string tiny_json(const std::string& added) {
  std::string vocab;
  // ids 8-11: the byte characters of 0xEF 0xBF 0xBD (U+FFFD) and 0xFF
  const char* chars[] = {"a", "b", "c", "\xC4\xA0" /* space */, "ab", "<", ">", "x",
                         "\xC3\xAF", "\xC2\xBF", "\xC2\xBD", "\xC3\xBF"};
  for (int i = 0; i < 12; ++i) vocab += std::string(i ? "," : "") + "\"" + chars[i] + "\":" + std::to_string(i);
  return R"({"added_tokens":[)" + added + R"(],"normalizer":null,
    "pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":false},
    "post_processor":null,"decoder":{"type":"ByteLevel"},
    "model":{"type":"BPE","vocab":{)" + vocab + R"(},"merges":["a b"]}})";
}

TEST(TokenizerAddedTokens, FlagsFollowTheHfLibrary) {
  auto tok = Tokenizer::from_hf_json(
      tiny_json(R"({"id":20,"content":"<L>","lstrip":true,"special":true},
                  {"id":21,"content":"<R>","rstrip":true,"special":false},
                  {"id":22,"content":"W","single_word":true,"special":false},
                  {"id":23,"content":"<P>","special":true})"),
      "");
  ASSERT_TRUE(tok) << tok.error().message;
  const auto& t = *tok;
  using V = std::vector<TokenId>;
  EXPECT_EQ(t->encode("ab  <L>c"), (V{4, 20, 2}));    // lstrip eats the spaces before
  EXPECT_EQ(t->encode("ab<R>  c"), (V{4, 21, 2}));    // rstrip eats the spaces after
  EXPECT_EQ(t->encode("a W b"), (V{0, 3, 22, 3, 1}));  // W alone is the added token
  EXPECT_EQ(t->encode("aW b"), (V{0, 3, 1}));          // inside a word it is not (and W has no byte token)
  EXPECT_EQ(t->encode("<P><P>ab<P>"), (V{23, 23, 4, 23}));
  EXPECT_TRUE(t->is_special(20));
  EXPECT_FALSE(t->is_special(21));
  EXPECT_EQ(t->decode(V{4, 20, 2, 21}, {true, false}), "abc<R>");
  EXPECT_EQ(t->decode(V{4, 20, 2, 21}), "ab<L>c<R>");
  EXPECT_EQ(t->token_id("<R>"), 21);
  EXPECT_EQ(t->token_text(4), "ab");
}

TEST(TokenizerLoad, ErrorsAreReportedNotThrown) {
  EXPECT_FALSE(Tokenizer::from_hf_json("not json", ""));
  EXPECT_FALSE(Tokenizer::from_hf_json("[]", ""));
  EXPECT_FALSE(Tokenizer::from_hf_json(R"({"model":{"type":"Unigram","vocab":[]}})", ""));
  auto r = Tokenizer::from_hf_json(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::unsupported);
  r = Tokenizer::from_hf_json(R"({"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}})", "");
  EXPECT_FALSE(r);
  r = Tokenizer::from_hf_json(tiny_json("") , "{broken");
  EXPECT_FALSE(r);
  EXPECT_FALSE(Tokenizer::from_hf_dir("/nonexistent/dir"));
}

TEST(TokenizerEncode, InvalidUtf8InputIsReplaced) {
  auto tok = Tokenizer::from_hf_json(tiny_json(""), "");
  ASSERT_TRUE(tok) << tok.error().message;
  // The 0xFF byte is replaced by U+FFFD (bytes EF BF BD) before tokenizing, not encoded as byte 0xFF.
  EXPECT_EQ((*tok)->encode("a\xFF" "b"), (std::vector<TokenId>{0, 8, 9, 10, 1}));

}

}  // namespace
}  // namespace memra::tokenizer
