#include "host/structured/token_vocabulary.hpp"

#include <algorithm>

namespace memra::structured {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::build(const tokenizer::Tokenizer& tok, int64_t vocab_size,
                                                              std::vector<int32_t> stop_ids) {
  auto v = std::make_shared<TokenVocabulary>();
  v->vocab_size_ = vocab_size;
  v->bytes_.resize(static_cast<size_t>(vocab_size));
  std::sort(stop_ids.begin(), stop_ids.end());
  v->stop_ids_ = std::move(stop_ids);
  v->trie_.emplace_back();
  const auto known = static_cast<int64_t>(tok.vocab_size());
  for (int64_t id = 0; id < vocab_size && id < known; ++id) {
    const auto t = static_cast<tokenizer::TokenId>(id);
    if (tok.is_special(t)) continue;
    const tokenizer::TokenId one[] = {t};
    std::string b = tok.decode_bytes(one, {.skip_special_tokens = false, .clean_up_tokenization_spaces = false});
    if (b.empty()) continue;
    uint32_t node = 0;
    for (char c : b) {
      const auto byte = static_cast<uint8_t>(c);
      auto& ch = v->trie_[node].children;
      auto it = std::lower_bound(ch.begin(), ch.end(), byte, [](const auto& p, uint8_t x) { return p.first < x; });
      if (it != ch.end() && it->first == byte) {
        node = it->second;
      } else {
        const auto next = static_cast<uint32_t>(v->trie_.size());
        ch.insert(it, {byte, next});
        v->trie_.emplace_back();  // may reallocate: `ch` is not used after this
        node = next;
      }
    }
    v->trie_[node].tokens.push_back(static_cast<int32_t>(id));
    v->bytes_[static_cast<size_t>(id)] = std::move(b);
  }
  return v;
}

bool TokenVocabulary::is_stop(int32_t id) const { return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id); }

}  // namespace memra::structured
