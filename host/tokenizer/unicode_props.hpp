// Character classes the pipeline needs, with the Hugging Face (Rust) definitions.
#pragma once

namespace memra::tokenizer::detail {

// Rust char::is_whitespace: Unicode White_Space.
inline bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t c);

// regex_syntax::is_word_character (\w): Alphabetic, M, Nd, Pc, Join_Control.
bool is_word_char(char32_t c);

}  // namespace memra::tokenizer::detail
