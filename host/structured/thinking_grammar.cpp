#include "host/structured/thinking_grammar.hpp"

#include <map>

namespace memra::structured {
namespace {

ExprPtr gap() { return rep(cls(ByteSet::of(" \t\r\n")), 0, kMaxThinkingGapBytes); }

// The marker's bytes matched after `k` matched and then byte `c` (the Knuth-Morris-Pratt step).
size_t next_match(const std::string& m, size_t k, uint8_t c) {
  std::string seen = m.substr(0, k);
  seen.push_back(static_cast<char>(c));
  for (size_t n = std::min(seen.size(), m.size()); n > 0; --n)
    if (seen.compare(seen.size() - n, n, m, 0, n) == 0) return n;
  return 0;
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

ExprPtr thinking_until_close(GrammarBuilder& b, const std::string& close, const ExprPtr& after) {
  // One rule per count of the marker's bytes matched so far; every byte but the one that
  // completes the marker leads to another such rule (a tail reference: nothing is pushed).
  std::vector<uint32_t> rules(close.size());
  for (auto& r : rules) r = b.declare();
  for (size_t k = 0; k < close.size(); ++k) {
    std::map<size_t, ByteSet> by_target;
    std::vector<ExprPtr> alts;
    for (int c = 0; c < 256; ++c) {
      const size_t j = next_match(close, k, static_cast<uint8_t>(c));
      if (j == close.size()) alts.push_back(seq({lit(std::string(1, static_cast<char>(c))), after}));
      else by_target[j].add(static_cast<uint8_t>(c));
    }
    for (const auto& [j, set] : by_target) alts.push_back(seq({cls(set), ref(rules[j])}));
    b.define(rules[k], alt(std::move(alts)));
  }
  return ref(rules[0]);
}

ExprPtr thinking_then(GrammarBuilder& b, const ThinkingMarkers& m, bool starts_inside, bool may_open, const ExprPtr& answer) {
  const ExprPtr thinking = thinking_until_close(b, m.close, seq({gap(), answer}));
  if (starts_inside) return thinking;
  if (!may_open) return answer;
  return alt({answer, seq({gap(), lit(m.open), thinking})});
}

ExprPtr close_then(const ThinkingMarkers& m, const ExprPtr& answer) { return seq({lit(m.close), gap(), answer}); }

ThinkingBudgetConstraint::ThinkingBudgetConstraint(std::shared_ptr<const CompiledGrammar> main,
                                                   std::shared_ptr<const CompiledGrammar> forced, ThinkingMarkers markers,
                                                   bool starts_inside, int64_t budget)
    : main_(std::move(main)),
      forced_grammar_(std::move(forced)),
      m_(std::move(markers)),
      budget_(budget),
      phase_(starts_inside ? Phase::inside : Phase::before) {
  current_ = main_->constraint(main_);
  maybe_force();
}

void ThinkingBudgetConstraint::feed(const std::string& bytes) {
  for (char c : bytes) {
    if (phase_ == Phase::before) {
      if (tail_.empty() && (c == ' ' || c == '\t' || c == '\r' || c == '\n')) continue;
      tail_.push_back(c);
      if (m_.open.compare(0, tail_.size(), tail_) != 0) {
        phase_ = Phase::after;
      } else if (tail_.size() == m_.open.size()) {
        phase_ = Phase::inside;
        tail_.clear();
      }
    } else if (phase_ == Phase::inside) {
      tail_.push_back(c);
      if (ends_with(tail_, m_.close)) {
        phase_ = Phase::after;
      } else if (tail_.size() >= m_.close.size()) {
        tail_.erase(0, tail_.size() + 1 - m_.close.size());
      }
    } else {
      return;
    }
  }
}

void ThinkingBudgetConstraint::maybe_force() {
  if (forced_ || phase_ != Phase::inside || spent_ < budget_) return;
  current_ = forced_grammar_->constraint(forced_grammar_);
  forced_ = true;
}

bool ThinkingBudgetConstraint::advance(int32_t token) {
  if (!current_->advance(token)) return false;
  if (forced_) return true;
  const Phase was = phase_;
  const TokenVocabulary& v = main_->vocab();
  if (token >= 0 && token < v.size() && !v.is_stop(token)) feed(v.bytes(token));
  if (was == Phase::inside && phase_ == Phase::inside) ++spent_;
  maybe_force();
  return true;
}

std::unique_ptr<engine::TokenConstraint> ThinkingBudgetConstraint::clone() const {
  auto c = std::make_unique<ThinkingBudgetConstraint>(main_, forced_grammar_, m_, false, budget_);
  c->current_ = current_->clone();
  c->forced_ = forced_;
  c->phase_ = phase_;
  c->tail_ = tail_;
  c->spent_ = spent_;
  return c;
}

}  // namespace memra::structured
