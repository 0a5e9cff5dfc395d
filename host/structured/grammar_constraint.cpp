#include "host/structured/grammar_constraint.hpp"

namespace memra::structured {
namespace {

// Interned states kept per request (then the tables restart at the next mask): at most this
// many, and at most about this much memory (their stacks, keys and transitions).
constexpr size_t kMaxStates = 200000;
constexpr size_t kMaxStateBytes = size_t{64} << 20;

void set_bit(std::vector<uint64_t>& bits, int32_t id) { bits[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  start_ = MatchState::start(grammar_);
}

int32_t CompiledGrammar::intern(MatchState state) const {
  std::string key = state.key();
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(states_.size());
  state_bytes_ += 2 * key.size() + 128;  // the key twice (map and stacks), and the entries
  ids_.emplace(std::move(key), id);
  states_.push_back(std::move(state));
  return id;
}

int32_t CompiledGrammar::step(int32_t state, uint8_t byte) const {
  const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
  if (auto it = next_.find(key); it != next_.end()) return it->second;
  MatchState m = states_[static_cast<size_t>(state)].advance(grammar_, byte);
  const int32_t next = m.dead() ? -1 : intern(std::move(m));
  next_.emplace(key, next);
  state_bytes_ += 48;
  return next;
}

// Marks every token whose bytes the grammar takes from `state`, walking the trie depth first.
void CompiledGrammar::walk(uint32_t node, int32_t state, std::vector<uint64_t>& bits) const {
  const auto& trie = vocab_->trie();
  for (const auto& [byte, child] : trie[node].children) {
    const int32_t next = step(state, byte);
    if (next < 0) continue;
    for (int32_t id : trie[child].tokens) set_bit(bits, id);
    if (!trie[child].children.empty()) walk(child, next, bits);
  }
}

std::shared_ptr<const std::vector<uint64_t>> CompiledGrammar::mask(const MatchState& state) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (states_.size() > kMaxStates || state_bytes_ > kMaxStateBytes) {  // a pathological request: start over
    ids_.clear();
    states_.clear();
    next_.clear();
    masks_.clear();
    state_bytes_ = 0;
  }
  const int32_t id = intern(state);
  if (auto it = masks_.find(id); it != masks_.end()) return it->second;
  auto bits = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>((vocab_->size() + 63) / 64), 0);
  if (state.can_continue()) walk(0, id, *bits);
  if (state.complete())
    for (int32_t t : vocab_->stop_ids())
      if (t >= 0 && t < vocab_->size()) set_bit(*bits, t);
  masks_.emplace(id, bits);
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
