// A context-free grammar over bytes, the form every constrained output is compiled
// to (JSON Schema, JSON mode, forced tool calls): rules of alternatives, each a
// sequence of byte sets and rule references. Repetition is right recursion, so a
// matcher's stacks stay bounded (tail references push nothing). No left recursion:
// the compilers here never make any, and the matcher guards against cycles anyway.
//
// Built with expressions (lit, cls, seq, alt, opt, star, rep, ref) that GrammarBuilder
// lowers into rules; rules may refer to rules defined later (recursive schemas).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace memra::structured {

// A set of bytes (a character class).
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  static ByteSet of(std::string_view bytes);
  static ByteSet range(uint8_t lo, uint8_t hi);
  ByteSet& add(uint8_t b) {
    bits[b >> 6] |= uint64_t{1} << (b & 63);
    return *this;
  }
  ByteSet& add_range(uint8_t lo, uint8_t hi);
  ByteSet& remove(std::string_view bytes);
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1u; }
  bool operator==(const ByteSet&) const = default;
};

// One element of an alternative.
struct Element {
  enum class Kind : uint8_t { bytes, rule, end } kind = Kind::end;
  uint32_t index = 0;  // bytes: into Grammar::sets; rule: the rule id
};

// The lowered grammar: elements of all alternatives back to back, each alternative
// ending with an `end` element; a rule is the list of its alternatives' first elements.
struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  std::vector<std::vector<uint32_t>> rules;
  uint32_t root = 0;
};

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;
struct Expr {
  enum class Kind { bytes, seq, alt, rule, rep, literal } kind = Kind::bytes;
  ByteSet set;                 // bytes
  std::vector<ExprPtr> parts;  // seq, alt; rep: parts[0]
  uint32_t rule = 0;           // rule
  int64_t min = 0, max = -1;   // rep: min..max times (max < 0: unbounded)
  std::string text;            // literal: these bytes in order (one node, however long)
};

ExprPtr lit(std::string_view text);  // the bytes, in order ("" = the empty sequence)
ExprPtr cls(const ByteSet& set);
ExprPtr seq(std::vector<ExprPtr> parts);
ExprPtr alt(std::vector<ExprPtr> parts);
ExprPtr opt(ExprPtr e);
ExprPtr star(ExprPtr e);                                // zero or more
ExprPtr rep(const ExprPtr& e, int64_t min, int64_t max);  // min..max times; max < 0: unbounded
ExprPtr ref(uint32_t rule);

class GrammarBuilder {
 public:
  // At most this many elements (a repetition is unrolled: its count multiplies its body's
  // size); define() checks the cost before lowering anything.
  explicit GrammarBuilder(uint64_t max_elements = UINT64_MAX) : max_elements_(max_elements) {}
  // A rule with no definition yet (for recursion); define() it before build().
  uint32_t declare();
  // Lowers `e` as the rule's alternatives; past the element limit the rule stays empty and
  // over_limit() turns true (nothing is expanded).
  void define(uint32_t rule, const ExprPtr& e);
  uint32_t add(const ExprPtr& e) {
    const uint32_t r = declare();
    define(r, e);
    return r;
  }
  size_t elements() const { return g_.elements.size(); }
  uint64_t max_elements() const { return max_elements_; }
  bool over_limit() const { return over_limit_; }
  // The elements lowering `e` inside a sequence adds, rules it makes included (saturating):
  // computed from the expression's structure, without expanding it.
  static uint64_t cost(const ExprPtr& e);
  // Whether each rule defined so far derives some finite byte string (a rule that only
  // refers to itself, directly or through others, never does).
  std::vector<bool> productive() const;
  // The grammar, with every alternative that needs an unproductive rule removed (so a
  // match never enters a branch it cannot finish).
  Grammar build(uint32_t root) &&;

 private:
  // Lowers `e` into a sequence of elements (sub-alternatives become fresh rules).
  void lower_into(const ExprPtr& e, std::vector<Element>& out);
  uint32_t set_index(const ByteSet& s);
  Grammar g_;
  std::vector<bool> defined_;
  uint64_t max_elements_;
  bool over_limit_ = false;
};

}  // namespace memra::structured
