#include "host/structured/grammar.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace memra::structured {

ByteSet ByteSet::of(std::string_view bytes) {
  ByteSet s;
  for (char c : bytes) s.add(static_cast<uint8_t>(c));
  return s;
}

ByteSet ByteSet::range(uint8_t lo, uint8_t hi) { return ByteSet{}.add_range(lo, hi); }

ByteSet& ByteSet::add_range(uint8_t lo, uint8_t hi) {
  for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  return *this;
}

ByteSet& ByteSet::remove(std::string_view bytes) {
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    bits[b >> 6] &= ~(uint64_t{1} << (b & 63));
  }
  return *this;
}

namespace {
ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }
Expr node(Expr::Kind kind) {
  Expr e;
  e.kind = kind;
  return e;
}
}  // namespace

ExprPtr lit(std::string_view text) {
  if (text.size() <= 1) {
    std::vector<ExprPtr> parts;
    for (char c : text) parts.push_back(cls(ByteSet{}.add(static_cast<uint8_t>(c))));
    return seq(std::move(parts));
  }
  Expr x = node(Expr::Kind::literal);
  x.text = std::string(text);
  return make(std::move(x));
}
ExprPtr cls(const ByteSet& set) {
  Expr x = node(Expr::Kind::bytes);
  x.set = set;
  return make(std::move(x));
}
ExprPtr seq(std::vector<ExprPtr> parts) {
  if (parts.size() == 1) return parts[0];
  Expr x = node(Expr::Kind::seq);
  x.parts = std::move(parts);
  return make(std::move(x));
}
ExprPtr alt(std::vector<ExprPtr> parts) {
  if (parts.size() == 1) return parts[0];
  Expr x = node(Expr::Kind::alt);
  x.parts = std::move(parts);
  return make(std::move(x));
}
ExprPtr opt(ExprPtr e) { return alt({std::move(e), seq({})}); }
ExprPtr star(ExprPtr e) { return rep(e, 0, -1); }
ExprPtr rep(const ExprPtr& e, int64_t min, int64_t max) {
  Expr x = node(Expr::Kind::rep);
  x.parts = {e};
  x.min = min;
  x.max = max;
  return make(std::move(x));
}
ExprPtr ref(uint32_t rule) {
  Expr x = node(Expr::Kind::rule);
  x.rule = rule;
  return make(std::move(x));
}

uint32_t GrammarBuilder::declare() {
  g_.rules.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(g_.rules.size() - 1);
}

uint32_t GrammarBuilder::set_index(const ByteSet& s) {
  // Character classes repeat a lot (string characters, digits): share them.
  for (size_t i = g_.sets.size(); i-- > 0 && i + 64 >= g_.sets.size();)
    if (g_.sets[i] == s) return static_cast<uint32_t>(i);
  g_.sets.push_back(s);
  return static_cast<uint32_t>(g_.sets.size() - 1);
}

namespace {

constexpr uint64_t kSaturated = uint64_t{1} << 62;
uint64_t add_sat(uint64_t a, uint64_t b) { return std::min(kSaturated, a + b); }
uint64_t mul_sat(uint64_t a, uint64_t b) { return a != 0 && b > kSaturated / a ? kSaturated : std::min(kSaturated, a * b); }

// What lower_into() adds for `e` (memoised: expressions share sub-expressions).
uint64_t cost_of(const ExprPtr& e, std::unordered_map<const Expr*, uint64_t>& memo);

// What define() adds for `e`: each alternative and its end element.
uint64_t define_cost(const ExprPtr& e, std::unordered_map<const Expr*, uint64_t>& memo) {
  if (e->kind != Expr::Kind::alt) return add_sat(cost_of(e, memo), 1);
  uint64_t c = 0;
  for (const auto& a : e->parts) c = add_sat(c, add_sat(cost_of(a, memo), 1));
  return c;
}

uint64_t cost_of(const ExprPtr& e, std::unordered_map<const Expr*, uint64_t>& memo) {
  if (auto it = memo.find(e.get()); it != memo.end()) return it->second;
  uint64_t c = 0;
  switch (e->kind) {
    case Expr::Kind::bytes:
    case Expr::Kind::rule:
      c = 1;
      break;
    case Expr::Kind::literal:
      c = e->text.size();
      break;
    case Expr::Kind::seq:
      for (const auto& p : e->parts) c = add_sat(c, cost_of(p, memo));
      break;
    case Expr::Kind::alt:
      c = add_sat(1, define_cost(e, memo));
      break;
    case Expr::Kind::rep: {
      const uint64_t x = cost_of(e->parts[0], memo);
      c = mul_sat(static_cast<uint64_t>(e->min), x);
      // The tail rules: R ::= x R | "" per optional repetition (one when unbounded).
      const uint64_t optional = e->max < 0 ? 1 : static_cast<uint64_t>(e->max - e->min);
      if (optional > 0) c = add_sat(c, add_sat(1, mul_sat(optional, add_sat(x, 3))));
      break;
    }
  }
  memo.emplace(e.get(), c);
  return c;
}

}  // namespace

uint64_t GrammarBuilder::cost(const ExprPtr& e) {
  std::unordered_map<const Expr*, uint64_t> memo;
  return cost_of(e, memo);
}

void GrammarBuilder::define(uint32_t rule, const ExprPtr& e) {
  defined_.at(rule) = true;
  if (over_limit_) return;
  if (max_elements_ != UINT64_MAX) {
    std::unordered_map<const Expr*, uint64_t> memo;
    if (add_sat(g_.elements.size(), define_cost(e, memo)) > max_elements_) {
      over_limit_ = true;
      return;
    }
  }
  std::vector<ExprPtr> alternatives = e->kind == Expr::Kind::alt ? e->parts : std::vector<ExprPtr>{e};
  for (const auto& a : alternatives) {
    std::vector<Element> seq_out;
    lower_into(a, seq_out);
    g_.rules[rule].push_back(static_cast<uint32_t>(g_.elements.size()));
    g_.elements.insert(g_.elements.end(), seq_out.begin(), seq_out.end());
    g_.elements.push_back({Element::Kind::end, 0});
  }
}

void GrammarBuilder::lower_into(const ExprPtr& e, std::vector<Element>& out) {
  switch (e->kind) {
    case Expr::Kind::bytes:
      out.push_back({Element::Kind::bytes, set_index(e->set)});
      return;
    case Expr::Kind::seq:
      for (const auto& p : e->parts) lower_into(p, out);
      return;
    case Expr::Kind::rule:
      out.push_back({Element::Kind::rule, e->rule});
      return;
    case Expr::Kind::literal:
      for (char c : e->text) out.push_back({Element::Kind::bytes, set_index(ByteSet{}.add(static_cast<uint8_t>(c)))});
      return;
    case Expr::Kind::alt: {
      const uint32_t r = declare();
      define(r, e);
      out.push_back({Element::Kind::rule, r});
      return;
    }
    case Expr::Kind::rep: {
      const ExprPtr& x = e->parts[0];
      for (int64_t i = 0; i < e->min; ++i) lower_into(x, out);
      if (e->max < 0) {
        // R ::= x R | ""  (a tail reference: the matcher pushes nothing for it)
        const uint32_t r = declare();
        define(r, alt({seq({x, ref(r)}), seq({})}));
        out.push_back({Element::Kind::rule, r});
      } else if (e->max > e->min) {
        // R_k ::= x R_{k+1} | "", built from the last one back (no recursion in the lowering).
        uint32_t next = declare();
        define(next, alt({x, seq({})}));
        for (int64_t k = e->max - e->min - 1; k-- > 0;) {
          const uint32_t r = declare();
          define(r, alt({seq({x, ref(next)}), seq({})}));
          next = r;
        }
        out.push_back({Element::Kind::rule, next});
      }
      return;
    }
  }
}

std::vector<bool> GrammarBuilder::productive() const {
  // Worklist: an alternative is done when every rule it refers to is productive; its rule
  // then is, which may finish the alternatives that refer to that rule (linear time).
  const size_t n = g_.rules.size();
  std::vector<bool> good(n, false);
  std::vector<uint32_t> alt_rule, pending;
  std::vector<std::vector<uint32_t>> users(n);  // rule -> alternatives referring to it (once per reference)
  std::vector<uint32_t> ready;
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t first : g_.rules[r]) {
      const auto a = static_cast<uint32_t>(alt_rule.size());
      alt_rule.push_back(r);
      uint32_t refs = 0;
      for (uint32_t i = first; g_.elements[i].kind != Element::Kind::end; ++i)
        if (g_.elements[i].kind == Element::Kind::rule) {
          users[g_.elements[i].index].push_back(a);
          ++refs;
        }
      pending.push_back(refs);
      if (refs == 0) ready.push_back(a);
    }
  }
  while (!ready.empty()) {
    const uint32_t r = alt_rule[ready.back()];
    ready.pop_back();
    if (good[r]) continue;
    good[r] = true;
    for (uint32_t a : users[r])
      if (--pending[a] == 0) ready.push_back(a);
  }
  return good;
}

Grammar GrammarBuilder::build(uint32_t root) && {
  for (size_t r = 0; r < defined_.size(); ++r)
    if (!defined_[r]) throw std::logic_error("grammar rule " + std::to_string(r) + " is declared but never defined");
  const std::vector<bool> good = productive();
  for (auto& alternatives : g_.rules) {
    std::erase_if(alternatives, [&](uint32_t first) {
      for (uint32_t i = first; g_.elements[i].kind != Element::Kind::end; ++i)
        if (g_.elements[i].kind == Element::Kind::rule && !good[g_.elements[i].index]) return true;
      return false;
    });
  }
  g_.root = root;
  return std::move(g_);
}

}  // namespace memra::structured
