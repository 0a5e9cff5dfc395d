#include "host/structured/grammar_constraint.hpp"

namespace memra::structured {
namespace {

constexpr size_t kMaxCachedMasks = 4096;

void set_bit(std::vector<uint64_t>& bits, int32_t id) { bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }

// Marks every token whose bytes the grammar takes from `state`, walking the trie depth first.
void walk(const Grammar& g, const TokenVocabulary& v, uint32_t node, const MatchState& state, std::vector<uint64_t>& bits) {
  const auto& trie = v.trie();
  for (const auto& [byte, child] : trie[node].children) {
    MatchState next = state.advance(g, byte);
    if (next.dead()) continue;
    for (int32_t id : trie[child].tokens) set_bit(bits, id);
    if (!trie[child].children.empty()) walk(g, v, child, next, bits);
  }
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  start_ = MatchState::start(grammar_);
}

std::shared_ptr<const std::vector<uint64_t>> CompiledGrammar::mask(const MatchState& state) const {
  std::string key = state.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = masks_.find(key); it != masks_.end()) return it->second;
  }
  auto bits = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>((vocab_->size() + 63) / 64), 0);
  if (state.can_continue()) walk(grammar_, *vocab_, 0, state, *bits);
  if (state.complete())
    for (int32_t id : vocab_->stop_ids())
      if (id >= 0 && id < vocab_->size()) set_bit(*bits, id);
  std::lock_guard<std::mutex> lock(mu_);
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  masks_.emplace(std::move(key), bits);
  return bits;
}

std::unique_ptr<engine::TokenConstraint> CompiledGrammar::constraint(std::shared_ptr<const CompiledGrammar> self) const {
  return std::make_unique<GrammarConstraint>(std::move(self), start_);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar, MatchState state)
    : grammar_(std::move(grammar)), state_(std::move(state)) {}

const std::vector<uint64_t>& GrammarConstraint::allowed() {
  if (ended_) {
    none_.assign(static_cast<size_t>((grammar_->vocab().size() + 63) / 64), 0);
    return none_;
  }
  if (!mask_) mask_ = grammar_->mask(state_);
  return *mask_;
}

bool GrammarConstraint::advance(int32_t token) {
  if (ended_ || token < 0 || token >= grammar_->vocab().size()) return false;
  const TokenVocabulary& v = grammar_->vocab();
  if (v.is_stop(token)) {
    if (!state_.complete()) return false;
    ended_ = true;
    mask_.reset();
    return true;
  }
  const std::string& b = v.bytes(token);
  if (b.empty()) return false;
  MatchState next = state_.advance(grammar_->grammar(), b);
  if (next.dead()) return false;
  state_ = std::move(next);
  mask_.reset();
  return true;
}

std::unique_ptr<engine::TokenConstraint> GrammarConstraint::clone() const {
  auto c = std::make_unique<GrammarConstraint>(grammar_, state_);
  c->ended_ = ended_;
  c->mask_ = mask_;
  return c;
}

}  // namespace memra::structured
