// The BPE model (Hugging Face `tokenizers` BPE semantics): characters (or bytes, for byte-level models) are
// merged by rank, lowest rank first and leftmost first on ties; unknown characters go to <0xNN> byte
// tokens (byte_fallback) or to the unk token (fused when fuse_unk). Results are cached per word.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/common/result.hpp"
#include "host/tokenizer/spec.hpp"
#include "host/tokenizer/string_id_map.hpp"

namespace memra::tokenizer::detail {

// The 256 characters GPT-2 byte-level BPE uses for bytes.
const std::array<char32_t, 256>& byte_to_unicode();

// A bounded, sharded cache word -> ids, safe for concurrent encode() calls.
class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 256;
  bool get(std::string_view word, std::vector<TokenId>& out) const;
  void put(std::string_view word, const TokenId* ids, std::size_t n) const;

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kMaxPerShard = 8192;
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<TokenId>, Hash, std::equal_to<>> map;
  };
  mutable std::array<Shard, kShards> shards_;
};

class Bpe {
 public:
  static Result<std::unique_ptr<Bpe>> create(const BpeSpec& spec, bool byte_level);

  // Appends the ids of one pre-tokenized word (raw UTF-8; byte-level mapping is done here).
  void encode(std::string_view word, std::vector<TokenId>& out) const;

  std::size_t merge_count() const { return merge_count_; }

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
  WordCache cache_;
};

}  // namespace memra::tokenizer::detail
