#include "host/structured/grammar.hpp"

#include <stdexcept>

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
}  // namespace

ExprPtr lit(std::string_view text) {
  std::vector<ExprPtr> parts;
  for (char c : text) parts.push_back(cls(ByteSet{}.add(static_cast<uint8_t>(c))));
  return seq(std::move(parts));
}
ExprPtr cls(const ByteSet& set) { return make({Expr::Kind::bytes, set, {}, 0}); }
ExprPtr seq(std::vector<ExprPtr> parts) {
  if (parts.size() == 1) return parts[0];
  return make({Expr::Kind::seq, {}, std::move(parts), 0});
}
ExprPtr alt(std::vector<ExprPtr> parts) {
  if (parts.size() == 1) return parts[0];
  return make({Expr::Kind::alt, {}, std::move(parts), 0});
}
ExprPtr opt(ExprPtr e) { return alt({std::move(e), seq({})}); }
ExprPtr star(ExprPtr e) { return rep(e, 0, -1); }
ExprPtr rep(const ExprPtr& e, int64_t min, int64_t max) {
  Expr x{Expr::Kind::rep, {}, {e}, 0};
  x.min = min;
  x.max = max;
  return make(std::move(x));
}
ExprPtr ref(uint32_t rule) { return make({Expr::Kind::rule, {}, {}, rule}); }

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

void GrammarBuilder::define(uint32_t rule, const ExprPtr& e) {
  defined_.at(rule) = true;
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

Grammar GrammarBuilder::build(uint32_t root) && {
  for (size_t r = 0; r < defined_.size(); ++r)
    if (!defined_[r]) throw std::logic_error("grammar rule " + std::to_string(r) + " is declared but never defined");
  g_.root = root;
  return std::move(g_);
}

}  // namespace memra::structured
