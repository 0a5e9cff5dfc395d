#include "host/tokenizer/added_tokens.hpp"

#include <algorithm>

#include "host/tokenizer/unicode_props.hpp"
#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {
namespace {

// The character ending just before byte `end` (valid UTF-8).
char32_t char_before(std::string_view s, std::size_t end) {
  std::size_t j = end - 1;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  return next_codepoint(s, j);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedTokenSpec*>& tokens) {
  std::fill(std::begin(root_children_), std::end(root_children_), -1);
  nodes_.emplace_back();  // root
  for (const auto* t : tokens) {
    if (t->content.empty()) continue;
    int node = 0;
    for (char ch : t->content) {
      auto b = static_cast<unsigned char>(ch);
      int next = child(node, b);
      if (next < 0) {
        next = static_cast<int>(nodes_.size());
        nodes_.emplace_back();
        if (node == 0) {
          root_children_[b] = next;
        } else {
          auto& ch_list = nodes_[node].children;
          ch_list.insert(std::lower_bound(ch_list.begin(), ch_list.end(), std::make_pair(b, -1)),
                         std::make_pair(b, next));
        }
      }
      node = next;
    }
    // A duplicate content keeps the first token (Hugging Face keeps one id per content).
    if (nodes_[node].token < 0) {
      nodes_[node].token = static_cast<int>(tokens_.size());
      tokens_.push_back(*t);
    }
  }
}

int AddedTokenMatcher::child(int node, unsigned char b) const {
  if (node == 0) return root_children_[b];
  const auto& c = nodes_[node].children;
  auto it = std::lower_bound(c.begin(), c.end(), std::make_pair(b, -1));
  return it != c.end() && it->first == b ? it->second : -1;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({0, text.size(), -1});
    return;
  }
  std::size_t start_offset = 0;  // end of the previous emitted segment
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    // Longest token starting at i.
    int node = root_children_[static_cast<unsigned char>(text[i])];
    if (node < 0) {
      ++i;
      continue;
    }
    int best = -1;
    std::size_t best_end = 0;
    std::size_t j = i + 1;
    while (true) {
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = j;
      }
      if (j >= n) break;
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      ++j;
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedTokenSpec& tok = tokens_[best];
    std::size_t start = i, stop = best_end;
    i = best_end;  // the scan goes on after the match whatever the flags decide
    if (start < start_offset) continue;  // inside whitespace an rstrip token already took
    if (tok.single_word) {
      bool word_before = start > 0 && is_word_char(char_before(text, start));
      std::size_t k = stop;
      bool word_after = stop < n && is_word_char(next_codepoint(text, k));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip) {
      std::size_t s = start;
      while (s > 0) {
        std::size_t j2 = s - 1;
        while (j2 > 0 && (static_cast<unsigned char>(text[j2]) & 0xC0) == 0x80) --j2;
        std::size_t k = j2;
        if (!is_white_space(next_codepoint(text, k))) break;
        s = j2;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      std::size_t k = stop;
      while (k < n) {
        std::size_t k2 = k;
        if (!is_white_space(next_codepoint(text, k2))) break;
        k = k2;
      }
      stop = k;
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

}  // namespace memra::tokenizer::detail
