// Pre-tokenizer regexes: Hugging Face patterns (Oniguruma syntax) translated to PCRE2 (UTF + UCP, JIT).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "core/common/result.hpp"

namespace memra::tokenizer::detail {

// Translates an Oniguruma pattern as Hugging Face `tokenizers` runs it into PCRE2 syntax with the same
// meaning on valid UTF-8:
//  - \s, \S: Unicode White_Space (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F,
//    3000), spelled out; PCRE2's own \s with UCP differs (adds U+180E, drops nothing) and JS's differs too.
//  - (?i: ... ) and (?i): ASCII letters only ([sS]); Oniguruma as HF configures it does not fold "ſ"/"K"
//    (checked against the HF library), while PCRE2 caseless matching would.
//  - \w, \W: Oniguruma's Unicode word class (letters, marks, decimal digits, connector punctuation).
//  - \uHHHH -> \x{HHHH}.
// Everything else (\p{L}, \p{N}, lookaheads, quantifiers) is passed through.
Result<std::string> translate_hf_regex(std::string_view pattern);

// Escapes a literal so PCRE2 matches it verbatim.
std::string quote_literal(std::string_view literal);

// A compiled PCRE2 pattern (JIT when available). Thread-safe: per-thread match data.
class Regex {
 public:
  // `pcre2_pattern` is already PCRE2 syntax.
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pcre2_pattern);
  static Result<std::shared_ptr<const Regex>> compile_hf(std::string_view hf_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first match at or after byte `start` of `subject` (valid UTF-8). False when none.
  bool find(std::string_view subject, std::size_t start, std::size_t& match_begin, std::size_t& match_end) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace memra::tokenizer::detail
