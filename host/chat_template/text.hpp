// String helpers that reproduce JavaScript string semantics on UTF-8 text, because the reference
// renderer (@huggingface/jinja) runs on JS strings: lengths and indexes count UTF-16 code units, `\s` and
// trim() know the Unicode spaces, numbers print as Number.prototype.toString prints them.
// Lone surrogates (which JS strings can hold) are kept as WTF-8 three-byte sequences.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/common/utf8_append.hpp"
#include <string_view>

namespace memra::chat_template::text {

// Decodes the code point at s[i] and advances i (WTF-8: surrogates decode as themselves). A malformed
// byte decodes to U+FFFD; inputs come from JSON and template text, which are valid UTF-8.
char32_t next_code_point(std::string_view s, std::size_t& i);
using memra::append_utf8;

std::u16string to_utf16(std::string_view s);
std::string from_utf16(std::u16string_view s);
std::size_t utf16_length(std::string_view s);

// JS WhiteSpace + LineTerminator (what /\s/ and String.prototype.trim match).
bool is_js_space(char32_t cp);
std::string_view trim(std::string_view s);        // String.prototype.trim
std::string_view trim_start(std::string_view s);  // trimStart
std::string_view trim_end(std::string_view s);    // trimEnd
// Byte length of the JS-whitespace run starting at s[i] (0 if none).
std::size_t space_run(std::string_view s, std::size_t i);

// ASCII /\w/.
inline bool is_word_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Number.prototype.toString() / String(number).
std::string js_number(double v);
// The reference's FloatValue.toString(): integral floats keep ".0", -0 is "-0.0".
std::string js_float(double v);
// JSON.stringify(number): like js_number but NaN/Infinity become null.
std::string json_number(double v);
// JSON.stringify(string), optionally followed by the ensure_ascii \uXXXX escaping of code units >= 0x7F.
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii);

// Unicode default (locale-independent) full case mapping, as String.prototype.toUpperCase/toLowerCase.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);

// JS `a < b` on strings: UTF-16 code unit order. Returns <0, 0, >0.
int compare_utf16(std::string_view a, std::string_view b);
// String.prototype.localeCompare with the default (root/en) collation. Returns <0, 0, >0.
int locale_compare(std::string_view a, std::string_view b);

// parseInt(s, 10) and parseFloat(s); nullopt where JS gives NaN.
std::optional<double> parse_int(std::string_view s);
std::optional<double> parse_float(std::string_view s);
// Number(s) for the loose-equality coercion (empty/whitespace-only is 0; NaN as nullopt).
std::optional<double> to_number(std::string_view s);

}  // namespace memra::chat_template::text
