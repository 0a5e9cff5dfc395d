// Pre-tokenizers (tokenizer.json "pre_tokenizer"): Split, ByteLevel, Metaspace, Digits, WhitespaceSplit and
// Sequences of them, with the split behaviours of the Hugging Face library.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
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
  // True when a step drops text (whitespace splits, "removed" splits): the words then may hold
  // fewer bytes than the section.
  bool drops_text() const { return drops_text_; }

  using Sink = std::function<void(std::string_view word)>;

  // Splits a normalized section into words and hands each to `sink`, in order, as soon as it is known
  // (no list of all words of a long text is built).
  void run(std::string_view text, bool at_start, const Sink& sink) const;

 private:
  struct Step {
    PreTokenizerStep spec;
    std::shared_ptr<const Regex> regex;  // split / byte_level(use_regex)
  };
  void apply(std::size_t step, const PreToken& in, const Sink& sink) const;
  std::vector<Step> steps_;
  bool byte_level_ = false;
  bool drops_text_ = false;
};

}  // namespace memra::tokenizer::detail
