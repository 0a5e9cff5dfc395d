// Tokenizer::Impl — the compiled pipeline shared by encode(), decode() and StreamDecoder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "host/tokenizer/added_tokens.hpp"
#include "host/tokenizer/bpe.hpp"
#include "host/tokenizer/decoder.hpp"
#include "host/tokenizer/normalizer.hpp"
#include "host/tokenizer/pre_tokenizer.hpp"
#include "host/tokenizer/spec.hpp"
#include "host/tokenizer/string_id_map.hpp"
#include "host/tokenizer/tokenizer.hpp"

namespace memra::tokenizer {

struct Tokenizer::Impl {
  std::string arena;                          // every token's text
  std::vector<std::string_view> id_to_token;  // into arena; "" for ids nothing uses
  detail::StringIdMap token_to_id;
  std::vector<std::uint8_t> special;  // by id: skipped by skip_special_tokens

  detail::AddedTokenMatcher raw_matcher;         // added tokens matched in the raw text
  detail::AddedTokenMatcher normalized_matcher;  // added tokens with normalized = true
  detail::Normalizer normalizer;
  detail::PreTokenizer pre_tokenizer;
  std::unique_ptr<detail::Bpe> bpe;
  detail::Decoder decoder;

  std::vector<TokenId> prefix_ids, suffix_ids;
  std::optional<TokenId> bos_id, eos_id, pad_id, unk_id;
  bool clean_up_default = false;
  std::string chat_template;

  static Result<std::unique_ptr<Impl>> build(detail::TokenizerSpec&& spec);

  // The longest token's text in bytes, a bound on the bytes one token covers (0: no bound,
  // the vocabulary fuses unknown runs): a word of n bytes is at least n / it tokens.
  std::size_t max_token_bytes = 0;
  // Whether `bytes` more of the words cannot fit: `out` already holds `have` ids and each
  // token covers at most max_token_bytes.
  bool cannot_fit(std::size_t bytes, std::size_t have, std::size_t limit) const {
    return limit != SIZE_MAX && max_token_bytes > 0 && bytes / max_token_bytes > limit - std::min(limit, have);
  }

  // Appends the ids of `text` to `out`, unless `out` passes `limit` ids first: then the rest
  // is skipped (out.size() > limit tells the caller).
  void encode_section(std::string_view text, bool at_start, std::vector<TokenId>& out, std::size_t limit) const;
  void encode_words(std::string_view text, bool at_start, std::vector<TokenId>& out, std::size_t limit) const;
  bool skipped(TokenId id, bool skip_special) const {
    if (id < 0 || static_cast<std::size_t>(id) >= id_to_token.size()) return true;
    return skip_special && special[id];
  }
};

// Factory used by the loaders (friend of Tokenizer).
struct TokenizerFactory {
  static Result<std::shared_ptr<const Tokenizer>> create(detail::TokenizerSpec&& spec);
};

namespace detail {
// hf_json_loader.cpp
Result<TokenizerSpec> spec_from_hf_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json);
// gguf_vocab.cpp
Result<TokenizerSpec> spec_from_gguf_vocab(const GgufVocab& vocab);
}  // namespace detail

}  // namespace memra::tokenizer
