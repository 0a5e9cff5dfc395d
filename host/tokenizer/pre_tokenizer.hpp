// Pre-tokenizers (tokenizer.json "pre_tokenizer"): Split, ByteLevel, Metaspace, Digits, WhitespaceSplit and
// Sequences of them, with the split behaviours of the Hugging Face library.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "host/common/result.hpp"
#include "host/tokenizer/regex.hpp"
#include "host/tokenizer/spec.hpp"

namespace memra::tokenizer::detail {

struct PreToken {
  std::string_view text;
  bool at_start = false;  // starts at byte 0 of the caller's whole input (Metaspace "first")
};

class PreTokenizer {
 public:
  static Result<PreTokenizer> create(const std::vector<PreTokenizerStep>& steps);

  // True when a ByteLevel step is present: the model then works on bytes, not characters.
  bool byte_level() const { return byte_level_; }

  // Splits a normalized section into words. Rewritten text (Metaspace, prefix spaces) lives in `storage`.
  void run(std::string_view text, bool at_start, std::vector<PreToken>& out, std::deque<std::string>& storage) const;

 private:
  struct Step {
    PreTokenizerStep spec;
    std::shared_ptr<const Regex> regex;  // split / byte_level(use_regex)
  };
  void apply(const Step& step, const PreToken& in, std::vector<PreToken>& out, std::deque<std::string>& storage) const;
  std::vector<Step> steps_;
  bool byte_level_ = false;
};

}  // namespace memra::tokenizer::detail
