// A tokenizer's vocabulary as the grammar mask sees it: every token's bytes (as the
// detokenizer writes them mid-text) in a byte trie, so the allowed tokens of a grammar
// state are found by one walk that shares prefixes and stops where the grammar refuses
// a byte. Special tokens are never allowed (their text is not output); the end-of-text
// ids are allowed once the grammar is complete. Built once per served model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/tokenizer/tokenizer.hpp"

namespace memra::structured {

class TokenVocabulary {
 public:
  // `vocab_size` is the model's (it may exceed the tokenizer's: the extra ids are never allowed).
  static std::shared_ptr<const TokenVocabulary> build(const tokenizer::Tokenizer& tok, int64_t vocab_size,
                                                      std::vector<int32_t> stop_ids);
  int64_t size() const { return vocab_size_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool is_stop(int32_t id) const;
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }

  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // by byte, ascending
    std::vector<int32_t> tokens;                          // tokens whose bytes end here
  };
  const std::vector<Node>& trie() const { return trie_; }

 private:
  int64_t vocab_size_ = 0;
  std::vector<std::string> bytes_;  // "" for special and unusable tokens
  std::vector<int32_t> stop_ids_;
  std::vector<Node> trie_;          // node 0 is the root
};

}  // namespace memra::structured
