// Splitting added (and special) tokens out of text before the model sees it, leftmost-longest like the
// Hugging Face AddedVocabulary, honouring lstrip / rstrip / single_word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "host/tokenizer/spec.hpp"

namespace memra::tokenizer::detail {

struct Segment {
  std::size_t begin = 0, end = 0;  // byte range in the scanned text
  TokenId id = -1;                 // the added token, or -1 for plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(const std::vector<const AddedTokenSpec*>& tokens);
  bool empty() const { return tokens_.empty(); }

  // Splits `text` into plain-text and added-token segments (covering it, in order, none empty).
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    int token = -1;  // index into tokens_ when a token ends here
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
  };
  int child(int node, unsigned char b) const;
  std::vector<Node> nodes_;
  int root_children_[256];
  std::vector<AddedTokenSpec> tokens_;
};

}  // namespace memra::tokenizer::detail
