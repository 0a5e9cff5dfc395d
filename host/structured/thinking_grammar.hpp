// Constrained outputs of reasoning models: the grammar (JSON Schema, JSON mode, a forced
// tool call) applies only after the model's thinking closes. The thinking itself is free
// text up to the first close marker (a byte automaton that refuses nothing but the end of
// text, so a model can only leave its thinking by writing the marker or by running out of
// max_tokens), then optional whitespace, then the answer's grammar: the JSON never lands in
// the thinking, and the thinking never lands in the JSON. The splitting the grammar
// enforces is the one ReasoningSplitter (host/server/reasoning_parser.hpp) reads.
//
// A thinking budget (thinking_token_budget) forces the close marker once the thinking has
// run that many tokens: ThinkingBudgetConstraint counts them and switches to a grammar that
// starts with the marker.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "host/engine/token_constraint.hpp"
#include "host/structured/grammar.hpp"
#include "host/structured/grammar_constraint.hpp"

namespace memra::structured {

struct ThinkingMarkers {
  std::string open, close;
};

// At most this many whitespace bytes between the thinking's markers and what surrounds them
// (templates and models write a newline or two: bounded, so a model cannot pad forever).
inline constexpr int64_t kMaxThinkingGapBytes = 8;

// Any bytes up to and including the first `close` marker, then `after` (in tail position:
// the matcher's stacks stay flat however long the thinking runs).
ExprPtr thinking_until_close(GrammarBuilder& b, const std::string& close, const ExprPtr& after);

// The whole output: when `starts_inside` (the prompt opened the thinking) the thinking, its
// close marker, whitespace, then `answer`; otherwise `answer` at once or, when `may_open`,
// optional whitespace, the open marker, the thinking, its close marker, whitespace, `answer`.
ExprPtr thinking_then(GrammarBuilder& b, const ThinkingMarkers& m, bool starts_inside, bool may_open, const ExprPtr& answer);

// The close marker, whitespace, then `answer`: what a budget forces.
ExprPtr close_then(const ThinkingMarkers& m, const ExprPtr& answer);

// Runs `main` (a thinking_then grammar) and counts the tokens spent inside the thinking (those
// that leave it open and did not open it); once `budget` of them are spent and the thinking is
// still open, continues with `forced` (a close_then grammar) from its start. The thinking is
// tracked byte for byte over the tokens' text, as ReasoningSplitter reads it.
class ThinkingBudgetConstraint : public engine::TokenConstraint {
 public:
  ThinkingBudgetConstraint(std::shared_ptr<const CompiledGrammar> main, std::shared_ptr<const CompiledGrammar> forced,
                           ThinkingMarkers markers, bool starts_inside, int64_t budget);
  const std::vector<uint64_t>& allowed() override { return current_->allowed(); }
  bool advance(int32_t token) override;
  std::unique_ptr<engine::TokenConstraint> clone() const override;
  bool forced() const { return forced_; }
  int64_t thinking_tokens() const { return spent_; }

 private:
  enum class Phase { before, inside, after };
  void feed(const std::string& bytes);
  void maybe_force();
  std::shared_ptr<const CompiledGrammar> main_, forced_grammar_;
  ThinkingMarkers m_;
  int64_t budget_;
  std::unique_ptr<engine::TokenConstraint> current_;
  bool forced_ = false;
  Phase phase_;
  std::string tail_;  // before: the open marker's bytes matched so far; inside: the recent bytes (a close marker's length)
  int64_t spent_ = 0;
};

}  // namespace memra::structured
