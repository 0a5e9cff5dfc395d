// The tokenizer pipeline as plain data: what a tokenizer.json or a GGUF vocabulary describes, before it is
// compiled into the runtime structures. Both loaders produce a TokenizerSpec; Tokenizer::Impl consumes it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host/tokenizer/tokenizer.hpp"

namespace memra::tokenizer::detail {

// A tokenizer.json pattern: {"String": "..."} (literal) or {"Regex": "..."} (Oniguruma syntax).
struct Pattern {
  bool is_regex = false;
  std::string text;
};

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
enum class PrependScheme { always, first, never };

struct NormalizerStep {
  enum class Kind { nfc, nfd, nfkc, nfkd, replace, prepend, lowercase, strip };
  Kind kind = Kind::nfc;
  Pattern pattern;      // replace
  std::string content;  // replace: replacement; prepend: the prefix
  bool strip_left = false, strip_right = false;
};

struct PreTokenizerStep {
  enum class Kind { split, byte_level, metaspace, digits, whitespace_split };
  Kind kind = Kind::split;
  // split
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  // byte_level
  bool add_prefix_space = false;
  bool use_regex = true;
  // metaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  PrependScheme prepend_scheme = PrependScheme::always;
  bool split = true;
  // digits
  bool individual_digits = false;
};

struct AddedTokenSpec {
  std::string content;
  TokenId id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

struct BpeSpec {
  std::vector<std::pair<std::string, TokenId>> vocab;  // the model vocabulary
  std::vector<std::pair<std::string, std::string>> merges;
  // Rank of merges[i]; empty = i. Equal ranks are allowed (score-ranked SentencePiece merges): ties are
  // then broken by position, leftmost first.
  std::vector<int> merge_ranks;
  std::optional<std::string> unk_token;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

struct DecoderStep {
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace };
  Kind kind = Kind::fuse;
  Pattern pattern;      // replace (String patterns only)
  std::string content;  // replace: replacement; strip: the character stripped
  int start = 0, stop = 0;  // strip
  std::string replacement = "\xE2\x96\x81";  // metaspace
  PrependScheme prepend_scheme = PrependScheme::always;
};

struct TokenizerSpec {
  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  BpeSpec model;
  std::vector<AddedTokenSpec> added_tokens;
  // Post-processor for a single sequence (add_special_tokens = true): prefix + ids + suffix.
  std::vector<TokenId> prefix_ids, suffix_ids;
  bool has_decoder = true;  // false: tokens are joined with " " (Hugging Face behaviour without a decoder)
  std::vector<DecoderStep> decoders;
  std::vector<TokenId> extra_special_ids;  // tokenizer_config additional_special_tokens (also skipped)
  std::optional<TokenId> bos_id, eos_id, pad_id, unk_id;
  bool clean_up_tokenization_spaces = false;
  std::string chat_template;
};

}  // namespace memra::tokenizer::detail
