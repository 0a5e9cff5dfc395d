// Decoding (tokenizer.json "decoder"), split into a per-token stage and a whole-text stage so that the same
// rules serve decode() and the streaming decoder:
//   per token:   Replace / Strip / Metaspace steps, then ByteLevel (characters -> bytes) or ByteFallback
//                (<0xNN> -> a byte; a run of them becomes its UTF-8 text, or one U+FFFD per byte when the
//                run is not valid UTF-8, as the Rust library does)
//   whole text:  lossy UTF-8 assembly, Strip after Fuse, then transformers' clean_up_tokenization.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "host/tokenizer/spec.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {

struct DecodedPiece {
  bool is_fallback_byte = false;
  unsigned char byte = 0;
  std::string text;  // bytes to append (may be an incomplete UTF-8 sequence for byte-level models)
};

class Decoder {
 public:
  static Result<Decoder> create(const std::vector<DecoderStep>& steps, bool has_decoder);

  // The piece of one token at position `index` among the tokens being decoded (after skipping).
  void piece(std::string_view token, std::size_t index, DecodedPiece& out) const;

  // Whole-text Strip after Fuse (content char, leading count, trailing count); start=stop=0 when none.
  char32_t strip_content() const { return strip_content_; }
  int strip_start() const { return strip_start_; }
  int strip_stop() const { return strip_stop_; }

  // decode() of a whole token list (already skip-filtered).
  std::string decode(const std::vector<std::string_view>& tokens, bool clean_up) const;
  // decode() without the UTF-8 repair: the raw bytes the tokens stand for (a byte-level
  // token may be part of a character, which decode() shows as U+FFFD).
  std::string decode_bytes(const std::vector<std::string_view>& tokens) const;

 private:
  std::vector<DecoderStep> per_token_;
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool join_with_space_ = false;  // no decoder at all
  char32_t strip_content_ = ' ';
  int strip_start_ = 0, strip_stop_ = 0;
};

// transformers' clean_up_tokenization: " ." -> ".", " ?", " !", " ,", " ' " -> "'", " n't", " 'm", " 's",
// " 've", " 're" (applied in that order, each over the whole text).
std::string clean_up_tokenization(std::string_view text);

// Removes up to `start` leading and `stop` trailing `content` characters (the Rust Strip decoder).
std::string strip_text(std::string_view text, char32_t content, int start, int stop);

// Appends the text of a finished run of fallback bytes.
void flush_fallback_run(std::string& run, Utf8StreamDecoder& utf8, std::string& out);

// Streaming versions of the whole-text stages. push() returns text that can no longer change.
class StripStream {
 public:
  StripStream(char32_t content, int start, int stop) : content_(content), start_left_(start), stop_(stop) {}
  void push(std::string_view text, std::string& out);
  void finish(std::string& out);

 private:
  char32_t content_;
  int start_left_;
  int stop_;
  std::string held_;  // trailing content characters that a later end of text would strip
};

class CleanupStream {
 public:
  void push(std::string_view text, std::string& out);
  void finish(std::string& out);

 private:
  std::string pending_;
};

}  // namespace memra::tokenizer::detail
