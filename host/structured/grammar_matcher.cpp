#include "host/structured/grammar_matcher.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace memra::structured {
namespace {

// Resolves rule references and finished alternatives on top of `stack` until every
// resulting stack has a byte set on top (or is empty), adding them to `out`.
void expand(const Grammar& g, Stack stack, std::vector<Stack>& out) {
  // Most advances land on a byte set: no expansion, no bookkeeping.
  if (!stack.empty() && g.elements[stack.back()].kind == Element::Kind::bytes) {
    out.push_back(std::move(stack));
    return;
  }
  std::vector<Stack> work{std::move(stack)};
  std::vector<Stack> seen;  // guards cycles through nullable rules (few entries: linear search)
  while (!work.empty()) {
    Stack s = std::move(work.back());
    work.pop_back();
    if (s.size() > kMaxStackDepth || out.size() > kMaxStacks) continue;
    if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    seen.push_back(s);
    if (s.empty()) {
      out.push_back(std::move(s));
      continue;
    }
    const uint32_t top = s.back();
    const Element& el = g.elements[top];
    switch (el.kind) {
      case Element::Kind::bytes:
        out.push_back(std::move(s));
        break;
      case Element::Kind::end:
        s.pop_back();
        work.push_back(std::move(s));
        break;
      case Element::Kind::rule: {
        s.pop_back();
        // The continuation after the reference, unless it is the end of its alternative
        // (a tail reference: right recursion then keeps the stack flat).
        if (g.elements[top + 1].kind != Element::Kind::end) s.push_back(top + 1);
        for (uint32_t first : g.rules[el.index]) {
          Stack t = s;
          t.push_back(first);
          work.push_back(std::move(t));
        }
        break;
      }
    }
  }
}

void normalise(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

MatchState MatchState::start(const Grammar& g) {
  MatchState m;
  for (uint32_t first : g.rules[g.root]) expand(g, Stack{first}, m.stacks_);
  normalise(m.stacks_);
  return m;
}

MatchState MatchState::advance(const Grammar& g, uint8_t b) const {
  MatchState m;
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Element& el = g.elements[s.back()];
    if (!g.sets[el.index].has(b)) continue;
    Stack t = s;
    t.back() += 1;
    expand(g, std::move(t), m.stacks_);
  }
  normalise(m.stacks_);
  return m;
}

MatchState MatchState::advance(const Grammar& g, std::string_view bytes) const {
  MatchState m = *this;
  for (char c : bytes) {
    m = m.advance(g, static_cast<uint8_t>(c));
    if (m.dead()) break;
  }
  return m;
}

bool MatchState::complete() const { return !stacks_.empty() && stacks_.front().empty(); }

bool MatchState::can_continue() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return !s.empty(); });
}

std::string MatchState::key() const {
  std::string k;
  for (const Stack& s : stacks_) {
    for (uint32_t e : s) k.append(reinterpret_cast<const char*>(&e), sizeof e);
    k.push_back('\xff');
    k.push_back('\xff');
    k.push_back('\xff');
    k.push_back('\xff');
    k.push_back('|');
  }
  return k;
}

}  // namespace memra::structured
