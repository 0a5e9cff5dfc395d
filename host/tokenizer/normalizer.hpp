// Normalizers (tokenizer.json "normalizer"): NFC/NFD/NFKC/NFKD and Lowercase through ICU, Replace,
// Prepend, Strip.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "host/tokenizer/regex.hpp"
#include "host/tokenizer/spec.hpp"

namespace memra::tokenizer::detail {

class Normalizer {
 public:
  static Result<Normalizer> create(const std::vector<NormalizerStep>& steps);
  bool empty() const { return steps_.empty(); }
  // Normalizes one section of text (valid UTF-8).
  std::string apply(std::string_view text) const;

 private:
  struct Step {
    NormalizerStep spec;
    std::shared_ptr<const Regex> regex;  // replace with a Regex pattern
    const void* icu = nullptr;           // icu::Normalizer2 for the Unicode forms
  };
  std::vector<Step> steps_;
};

}  // namespace memra::tokenizer::detail
