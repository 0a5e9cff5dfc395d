// UTF-8 helpers shared by the encoder and the decoders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/common/utf8_append.hpp"
#include <string_view>

namespace memra::tokenizer::detail {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Appends the UTF-8 encoding of `cp` (which must be a Unicode scalar value).
using memra::append_utf8;

// Decodes the well-formed character starting at s[i] and advances i. Only for text known to be valid.
char32_t next_codepoint(std::string_view s, std::size_t& i);

// Byte length of the character whose lead byte is `lead` (1 for continuation/invalid bytes).
inline std::size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

bool is_valid_utf8(std::string_view s);

// Returns `s` with every ill-formed subsequence replaced by U+FFFD, using the "maximal subpart" rule of
// the WHATWG Encoding standard (the rule of TextDecoder and Rust's String::from_utf8_lossy).
std::string sanitize_utf8(std::string_view s);

// Incremental lossy UTF-8 decoder (WHATWG): feed bytes in any chunking, get the same text as decoding the
// concatenation at once. Complete characters are appended to `out`; an incomplete tail is held.
class Utf8StreamDecoder {
 public:
  void feed(std::string_view bytes, std::string& out);
  // End of input: a held incomplete sequence becomes one U+FFFD.
  void flush(std::string& out);
  bool holding() const { return needed_ != 0; }
  void reset() { needed_ = seen_ = 0; lower_ = 0x80; upper_ = 0xBF; held_.clear(); }

 private:
  int needed_ = 0;  // continuation bytes still needed
  int seen_ = 0;
  unsigned char lower_ = 0x80, upper_ = 0xBF;
  std::string held_;  // bytes of the incomplete sequence
};

}  // namespace memra::tokenizer::detail
