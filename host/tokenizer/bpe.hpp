// The BPE model (Hugging Face `tokenizers` BPE semantics): characters (or bytes, for byte-level models) are
// merged by rank, lowest rank first and leftmost first on ties; unknown characters go to <0xNN> byte
// tokens (byte_fallback) or to the unk token (fused when fuse_unk). Results are cached per word.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "host/tokenizer/spec.hpp"
#include "host/tokenizer/string_id_map.hpp"

namespace memra::tokenizer::detail {

// The 256 characters GPT-2 byte-level BPE uses for bytes.
const std::array<char32_t, 256>& byte_to_unicode();

// A bounded cache word -> ids, one per tokenizer, shared by the threads that encode with
// it: 16 shards by hash, each with its own lock and at most 4,096 words and 256 KB of keys
// (a full shard starts over), so it holds at most ~6 MB however many threads there are.
class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 256;
  static constexpr std::size_t kShards = 16;
  WordCache();
  ~WordCache();
  bool get(std::string_view word, std::vector<TokenId>& out) const;
  void put(std::string_view word, const TokenId* ids, std::size_t n) const;

 private:
  struct Shard;
  std::unique_ptr<Shard[]> shards_;
};

class Bpe {
 public:
  static Result<std::unique_ptr<Bpe>> create(const BpeSpec& spec, bool byte_level);

  // Appends the ids of one pre-tokenized word (raw UTF-8; byte-level mapping is done here).
  void encode(std::string_view word, std::vector<TokenId>& out) const;

  std::size_t merge_count() const { return merge_count_; }
  // Runs of unknown characters fuse into one unk token (so a word's tokens are not
  // bounded below by its length).
  bool fuses_unknown() const { return fuse_unk_; }

 private:
  struct PairValue {
    std::int32_t rank;
    TokenId new_id;
  };
  // Open-addressing map (id, id) -> (rank, new id).
  struct PairMap {
    std::vector<std::uint64_t> keys;
    std::vector<PairValue> values;
    std::uint64_t mask = 0;
    void reserve(std::size_t n);
    void insert(TokenId a, TokenId b, PairValue v);
    const PairValue* find(TokenId a, TokenId b) const;
  };

  void encode_piece(std::string_view word, std::vector<TokenId>& out) const;
  void encode_uncached(std::string_view word, std::vector<TokenId>& out) const;
  const TokenId* vocab_find(std::string_view s) const;

  std::string arena_;  // the vocabulary strings, referenced by vocab_
  StringIdMap vocab_;
  PairMap pairs_;
  std::size_t merge_count_ = 0;
  bool byte_level_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  TokenId unk_id_ = -1;
  std::array<TokenId, 256> byte_ids_{};      // byte-level: id of each byte's character (-1 if absent)
  std::array<std::string, 256> byte_chars_;  // byte-level: UTF-8 of each byte's character
  std::array<TokenId, 256> fallback_ids_{};  // <0xNN> ids (-1 if absent)
  // SentencePiece vocabularies: a word may be cut before a U+2581 whose preceding character c never
  // appears as "c U+2581" inside a vocabulary token — no merge can then cross the cut, so the result is
  // the same and the pieces hit the cache (a Gemma-style pre-tokenizer leaves whole lines as one word).
  bool meta_split_ = false;
  std::vector<char32_t> meta_followed_;  // sorted: the characters c that do appear before U+2581
  WordCache cache_;
};

}  // namespace memra::tokenizer::detail
