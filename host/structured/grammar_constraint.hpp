// engine::TokenConstraint for a grammar: the allowed tokens of the current state are
// those whose bytes the grammar accepts from it (one trie walk), plus the end-of-text
// ids once the grammar is complete. Masks are cached by state (a JSON string's
// characters or an unfinished number reach the same state over and over), the cache
// shared by every sequence of one request.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "host/engine/token_constraint.hpp"
#include "host/structured/grammar.hpp"
#include "host/structured/grammar_matcher.hpp"
#include "host/structured/token_vocabulary.hpp"

namespace memra::structured {

// A grammar bound to a vocabulary, with its mask cache; shared by a request's sequences.
// States are interned and their byte transitions memoised, so the trie walk of a mask
// costs a table lookup per trie node (inside a JSON string nearly every byte leads back
// to the same state).
class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocab);
  const Grammar& grammar() const { return grammar_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  const MatchState& start() const { return start_; }
  // The allowed-token bitset of `state` (computed once per distinct state).
  std::shared_ptr<const std::vector<uint64_t>> mask(const MatchState& state) const;
  // A fresh constraint at the start (engine::TokenConstraintFactory for one sequence).
  std::unique_ptr<engine::TokenConstraint> constraint(std::shared_ptr<const CompiledGrammar> self) const;

 private:
  int32_t intern(MatchState state) const;  // under mu_
  int32_t step(int32_t state, uint8_t byte) const;  // under mu_; -1: dead
  void walk(uint32_t node, int32_t state, std::vector<uint64_t>& bits) const;

  Grammar grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  MatchState start_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, int32_t> ids_;
  mutable std::vector<MatchState> states_;
  // (state << 8 | byte) -> the next state (-1: dead): only the transitions a walk took, so a
  // state costs its stacks, not a 256-entry row (a wide enum interns 100,000s of states).
  mutable std::unordered_map<uint64_t, int32_t> next_;
  mutable size_t state_bytes_ = 0;  // what ids_, states_ and next_ hold, about
  mutable std::unordered_map<int32_t, std::shared_ptr<const std::vector<uint64_t>>> masks_;
};

class GrammarConstraint : public engine::TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const CompiledGrammar> grammar, MatchState state);
  const std::vector<uint64_t>& allowed() override;
  bool advance(int32_t token) override;
  std::unique_ptr<engine::TokenConstraint> clone() const override;
  const MatchState& state() const { return state_; }
  bool ended() const { return ended_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  MatchState state_;
  bool ended_ = false;  // an end-of-text token was taken
  std::shared_ptr<const std::vector<uint64_t>> mask_;
  std::vector<uint64_t> none_;
};

}  // namespace memra::structured
