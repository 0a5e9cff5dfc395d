#include "host/structured/string_automaton.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>

namespace memra::structured {

// ---- CharSet -------------------------------------------------------------------------

namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

void normalise(std::vector<std::pair<uint32_t, uint32_t>>& r) {
  std::sort(r.begin(), r.end());
  size_t n = 0;
  for (const auto& x : r) {
    if (n > 0 && x.first <= r[n - 1].second + 1) {
      r[n - 1].second = std::max(r[n - 1].second, x.second);
    } else {
      r[n++] = x;
    }
  }
  r.resize(n);
}

}  // namespace

CharSet CharSet::of(uint32_t lo, uint32_t hi) { return CharSet{}.add(lo, hi); }

CharSet CharSet::any() { return CharSet::of(0, kMaxCodePoint); }

CharSet& CharSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return *this;
  // Surrogates are not characters: a string's content is UTF-8, which cannot hold them.
  if (lo < kSurrogateLo) ranges.emplace_back(lo, std::min(hi, kSurrogateLo - 1));
  if (hi > kSurrogateHi) ranges.emplace_back(std::max(lo, kSurrogateHi + 1), hi);
  normalise(ranges);
  return *this;
}

CharSet& CharSet::add(const CharSet& other) {
  ranges.insert(ranges.end(), other.ranges.begin(), other.ranges.end());
  normalise(ranges);
  return *this;
}

CharSet CharSet::complement() const {
  CharSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

CharSet CharSet::intersect(const CharSet& other) const {
  CharSet out;
  size_t i = 0, j = 0;
  while (i < ranges.size() && j < other.ranges.size()) {
    const uint32_t lo = std::max(ranges[i].first, other.ranges[j].first);
    const uint32_t hi = std::min(ranges[i].second, other.ranges[j].second);
    if (lo <= hi) out.ranges.emplace_back(lo, hi);
    if (ranges[i].second < other.ranges[j].second) ++i;
    else ++j;
  }
  return out;
}

bool CharSet::has(uint32_t c) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(c, UINT32_MAX));
  return it != ranges.begin() && std::prev(it)->second >= c;
}

bool Dfa::matches(std::u32string_view text) const {
  if (states.empty()) return false;
  uint32_t q = 0;
  for (char32_t c : text) {
    const auto& e = states[q].edges;
    auto it = std::find_if(e.begin(), e.end(), [&](const Edge& x) { return x.lo <= c && c <= x.hi; });
    if (it == e.end()) return false;
    q = it->to;
  }
  return states[q].accept;
}

// ---- Regex parsing -------------------------------------------------------------------

namespace {

struct Re {
  enum class Kind { chars, cat, alt, rep, bol, eol } kind = Kind::cat;
  CharSet set;
  std::vector<Re> kids;
  int64_t min = 0, max = -1;
};

constexpr size_t kMaxGroupDepth = 64;

CharSet digit_class() { return CharSet::of('0', '9'); }
CharSet word_class() { return CharSet::of('0', '9').add('A', 'Z').add('a', 'z').add('_', '_'); }
CharSet space_class() {
  // ECMAScript's WhiteSpace and LineTerminator.
  CharSet s;
  for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu})
    s.add(c, c);
  s.add(0x2000, 0x200A);
  return s;
}
CharSet dot_class() {
  CharSet s = CharSet::of('\n', '\n').add('\r', '\r').add(0x2028, 0x2029);
  return s.complement();
}

std::string show(uint32_t c) {
  if (c >= 0x20 && c < 0x7F) return std::string(1, static_cast<char>(c));
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", c);
  return buf;
}

class RegexParser {
 public:
  explicit RegexParser(std::u32string text) : s_(std::move(text)) {}

  std::optional<AutomatonError> parse(Re& out) {
    out = disjunction();
    if (!err_ && pos_ < s_.size()) fail("unbalanced ')' at offset " + std::to_string(pos_), false);
    return err_;
  }

 private:
  void fail(std::string message, bool unsupported) {
    if (!err_) err_ = AutomatonError{std::move(message), unsupported};
  }
  bool more() const { return pos_ < s_.size() && !err_; }
  uint32_t peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : 0; }
  bool eat(uint32_t c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Re disjunction() {
    Re alt_node;
    alt_node.kind = Re::Kind::alt;
    alt_node.kids.push_back(alternative());
    while (!err_ && eat('|')) alt_node.kids.push_back(alternative());
    if (alt_node.kids.size() == 1) return std::move(alt_node.kids[0]);
    return alt_node;
  }

  Re alternative() {
    Re cat;
    cat.kind = Re::Kind::cat;
    while (more() && peek() != '|' && peek() != ')') {
      Re t = term();
      if (err_) break;
      cat.kids.push_back(std::move(t));
    }
    return cat;
  }

  Re term() {
    const uint32_t c = peek();
    if (c == '^' || c == '$') {
      ++pos_;
      Re a;
      a.kind = c == '^' ? Re::Kind::bol : Re::Kind::eol;
      if (quantifier_follows()) fail("a quantifier after '" + show(c) + "' has nothing to repeat", false);
      return a;
    }
    Re a = atom();
    if (err_) return a;
    return quantified(std::move(a));
  }

  bool quantifier_follows() {
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') return true;
    if (c != '{') return false;
    int64_t lo = 0, hi = 0;
    size_t end = 0;
    return brace_counts(lo, hi, end);
  }

  // {m}, {m,}, {m,n} at pos_: its counts (hi -1: unbounded) and the offset after it.
  bool brace_counts(int64_t& lo, int64_t& hi, size_t& end) const {
    size_t p = pos_ + 1;
    auto number = [&](int64_t& v) {
      const size_t start = p;
      v = 0;
      while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (s_[p] - '0'), int64_t{1} << 40);
        ++p;
      }
      return p > start;
    };
    if (!number(lo)) return false;
    hi = lo;
    if (p < s_.size() && s_[p] == ',') {
      ++p;
      if (!number(hi)) hi = -1;
    }
    if (p >= s_.size() || s_[p] != '}') return false;
    end = p + 1;
    return true;
  }

  Re quantified(Re a) {
    int64_t lo = 0, hi = 0;
    const uint32_t c = peek();
    if (c == '*') lo = 0, hi = -1, ++pos_;
    else if (c == '+') lo = 1, hi = -1, ++pos_;
    else if (c == '?') lo = 0, hi = 1, ++pos_;
    else if (c == '{') {
      size_t end = 0;
      if (!brace_counts(lo, hi, end)) return a;  // a literal '{' (Annex B)
      pos_ = end;
      if (hi >= 0 && hi < lo) {
        fail("the quantifier {" + std::to_string(lo) + "," + std::to_string(hi) + "} has its counts out of order", false);
        return a;
      }
      if (lo > kMaxRepeat || hi > kMaxRepeat) {
        fail("a quantifier count over " + std::to_string(kMaxRepeat) + " ({" + std::to_string(lo) +
                 (hi == lo ? std::string() : "," + (hi < 0 ? std::string() : std::to_string(hi))) +
                 "}) is over memra-host's limit",
             false);
        return a;
      }
    } else {
      return a;
    }
    eat('?');  // lazy: the same language
    if (quantifier_follows()) {
      fail("a quantifier follows another at offset " + std::to_string(pos_) + " (nothing to repeat)", false);
      return a;
    }
    Re r;
    r.kind = Re::Kind::rep;
    r.min = lo;
    r.max = hi;
    r.kids.push_back(std::move(a));
    return r;
  }

  Re chars(CharSet set) {
    Re r;
    r.kind = Re::Kind::chars;
    r.set = std::move(set);
    return r;
  }

  Re atom() {
    const uint32_t c = peek();
    if (c == '(') return group();
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      return chars(dot_class());
    }
    if (c == '*' || c == '+' || c == '?') {
      fail("'" + show(c) + "' at offset " + std::to_string(pos_) + " has nothing to repeat", false);
      return {};
    }
    if (c == '{' && quantifier_follows()) {
      fail("'{' at offset " + std::to_string(pos_) + " has nothing to repeat", false);
      return {};
    }
    if (c == '\\') {
      ++pos_;
      CharSet set;
      if (!escape(set, false)) return {};
      return chars(std::move(set));
    }
    ++pos_;
    return chars(CharSet::of(c, c));
  }

  Re group() {
    ++pos_;  // '('
    if (eat('?')) {
      if (eat(':')) {
      } else if (peek() == '=' || peek() == '!') {
        fail("lookahead '(?" + show(peek()) + "' cannot be compiled into a grammar", true);
        return {};
      } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
        fail("lookbehind '(?<" + show(peek(1)) + "' cannot be compiled into a grammar", true);
        return {};
      } else if (eat('<')) {
        while (pos_ < s_.size() && s_[pos_] != '>') ++pos_;
        if (!eat('>')) {
          fail("a named group's name is not closed by '>'", false);
          return {};
        }
      } else {
        fail("'(?" + show(peek()) + "' is not a group memra-host knows", false);
        return {};
      }
    }
    if (++depth_ > kMaxGroupDepth) {
      fail("groups are nested more than " + std::to_string(kMaxGroupDepth) + " deep", false);
      return {};
    }
    Re inner = disjunction();
    --depth_;
    if (err_) return {};
    if (!eat(')')) {
      fail("a group is not closed by ')'", false);
      return {};
    }
    return inner;
  }

  static bool hex_digit(uint32_t c, uint32_t& v) {
    if (c >= '0' && c <= '9') v = c - '0';
    else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
    else return false;
    return true;
  }
  bool hex_digits(int n, uint32_t& out) {
    out = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t v = 0;
      if (!hex_digit(peek(static_cast<size_t>(i)), v)) return false;
      out = out * 16 + v;
    }
    pos_ += static_cast<size_t>(n);
    return true;
  }

  // After a '\': the class or character it stands for. `in_class`: inside [...].
  bool escape(CharSet& out, bool in_class) {
    if (pos_ >= s_.size()) {
      fail("the pattern ends with a lone '\\'", false);
      return false;
    }
    const uint32_t c = s_[pos_++];
    switch (c) {
      case 'd': out = digit_class(); return true;
      case 'D': out = digit_class().complement(); return true;
      case 'w': out = word_class(); return true;
      case 'W': out = word_class().complement(); return true;
      case 's': out = space_class(); return true;
      case 'S': out = space_class().complement(); return true;
      case 't': out = CharSet::of('\t', '\t'); return true;
      case 'n': out = CharSet::of('\n', '\n'); return true;
      case 'r': out = CharSet::of('\r', '\r'); return true;
      case 'f': out = CharSet::of('\f', '\f'); return true;
      case 'v': out = CharSet::of('\v', '\v'); return true;
      case 'b':
        if (in_class) {
          out = CharSet::of(8, 8);
          return true;
        }
        fail("the word boundary '\\b' cannot be compiled into a grammar", true);
        return false;
      case 'B':
        fail("the assertion '\\B' cannot be compiled into a grammar", true);
        return false;
      case 'p':
      case 'P':
        fail("the Unicode property escape '\\" + show(c) + "' is not supported", true);
        return false;
      case 'k':
        fail("the backreference '\\k' cannot be compiled into a grammar", true);
        return false;
      case '0':
        if (peek() >= '0' && peek() <= '9') {
          fail("octal escapes ('\\0" + show(peek()) + "') are not supported", true);
          return false;
        }
        out = CharSet::of(0, 0);
        return true;
      case 'c': {
        const uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++pos_;
          out = CharSet::of(l % 32, l % 32);
          return true;
        }
        out = CharSet::of('\\', '\\');  // Annex B: "\c" is a backslash and a 'c'
        --pos_;
        return true;
      }
      case 'x': {
        uint32_t v = 0;
        if (!hex_digits(2, v)) {
          out = CharSet::of('x', 'x');
          return true;
        }
        out = CharSet::of(v, v);
        return true;
      }
      case 'u': {
        uint32_t v = 0;
        if (peek() == '{') {
          size_t p = pos_ + 1;
          v = 0;
          uint32_t d = 0;
          while (p < s_.size() && hex_digit(s_[p], d) && v <= kMaxCodePoint) v = v * 16 + d, ++p;
          if (p == pos_ + 1 || p >= s_.size() || s_[p] != '}' || v > kMaxCodePoint) {
            fail("a '\\u{...}' escape is not a code point", false);
            return false;
          }
          pos_ = p + 1;
        } else if (!hex_digits(4, v)) {
          out = CharSet::of('u', 'u');
          return true;
        } else if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const size_t save = pos_;
          pos_ += 2;
          uint32_t lo = 0;
          if (hex_digits(4, lo) && lo >= 0xDC00 && lo <= 0xDFFF) v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
          else pos_ = save;
        }
        if (v >= kSurrogateLo && v <= kSurrogateHi) {
          fail("the escape of a lone surrogate (" + show(v) + ") matches no character of a JSON string memra-host writes", true);
          return false;
        }
        out = CharSet::of(v, v);
        return true;
      }
      default:
        if (c >= '1' && c <= '9') {
          fail("the backreference '\\" + show(c) + "' cannot be compiled into a grammar", true);
          return false;
        }
        out = CharSet::of(c, c);  // an identity escape: \. \\ \/ \- \[ ...
        return true;
    }
  }

  // One class atom: a character (single = true) or a class escape.
  bool class_atom(CharSet& out, bool& single, uint32_t& ch) {
    if (pos_ >= s_.size()) {
      fail("a character class is not closed by ']'", false);
      return false;
    }
    if (s_[pos_] == '\\') {
      ++pos_;
      const uint32_t e = peek();
      if (!escape(out, true)) return false;
      single = !(e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S');
      ch = single ? out.ranges[0].first : 0;
      return true;
    }
    ch = s_[pos_++];
    single = true;
    out = CharSet::of(ch, ch);
    return true;
  }

  Re char_class() {
    ++pos_;  // '['
    const bool negate = eat('^');
    CharSet set;
    while (!err_) {
      if (pos_ >= s_.size()) {
        fail("a character class is not closed by ']'", false);
        return {};
      }
      if (eat(']')) break;
      CharSet a;
      bool single_a = false;
      uint32_t ca = 0;
      if (!class_atom(a, single_a, ca)) return {};
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        CharSet b;
        bool single_b = false;
        uint32_t cb = 0;
        if (!class_atom(b, single_b, cb)) return {};
        if (single_a && single_b) {
          if (cb < ca) {
            fail("the class range " + show(ca) + "-" + show(cb) + " is out of order", false);
            return {};
          }
          set.add(ca, cb);
        } else {  // Annex B: a class escape beside '-' makes the '-' literal
          set.add(a).add(b).add('-', '-');
        }
        continue;
      }
      set.add(a);
    }
    return chars(negate ? set.complement() : set);
  }

  std::u32string s_;
  size_t pos_ = 0;
  size_t depth_ = 0;
  std::optional<AutomatonError> err_;
};

bool decode_utf8(std::string_view in, std::u32string& out) {
  for (size_t i = 0; i < in.size();) {
    const auto b0 = static_cast<uint8_t>(in[i]);
    uint32_t c = 0;
    int n = 0;
    if (b0 < 0x80) c = b0, n = 1;
    else if ((b0 & 0xE0) == 0xC0) c = b0 & 0x1F, n = 2;
    else if ((b0 & 0xF0) == 0xE0) c = b0 & 0x0F, n = 3;
    else if ((b0 & 0xF8) == 0xF0) c = b0 & 0x07, n = 4;
    else return false;
    if (i + static_cast<size_t>(n) > in.size()) return false;
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(in[i + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return false;
      c = (c << 6) | (b & 0x3F);
    }
    out.push_back(c);
    i += static_cast<size_t>(n);
  }
  return true;
}

// ---- Regex to NFA to DFA ---------------------------------------------------------------

constexpr uint64_t kSat = uint64_t{1} << 62;
uint64_t sat_add(uint64_t a, uint64_t b) { return std::min(kSat, a + b); }
uint64_t sat_mul(uint64_t a, uint64_t b) { return a != 0 && b > kSat / a ? kSat : std::min(kSat, a * b); }

// The NFA states building `r` adds (computed from the parse, nothing unrolled).
uint64_t nfa_size(const Re& r) {
  switch (r.kind) {
    case Re::Kind::chars:
    case Re::Kind::bol:
    case Re::Kind::eol:
      return 1;
    case Re::Kind::cat: {
      uint64_t n = 0;
      for (const auto& k : r.kids) n = sat_add(n, nfa_size(k));
      return n;
    }
    case Re::Kind::alt: {
      uint64_t n = 1;
      for (const auto& k : r.kids) n = sat_add(n, nfa_size(k));
      return n;
    }
    case Re::Kind::rep: {
      const uint64_t copies = static_cast<uint64_t>(r.min) + (r.max < 0 ? 1 : static_cast<uint64_t>(r.max - r.min));
      return sat_add(sat_add(sat_mul(nfa_size(r.kids[0]), copies), copies), 2);
    }
  }
  return kSat;
}

struct Nfa {
  enum class EdgeKind : uint8_t { eps, bol, eol, chars };
  struct Edge {
    EdgeKind kind;
    uint32_t set;  // chars: into sets
    uint32_t to;
  };
  std::vector<std::vector<Edge>> out;
  std::vector<CharSet> sets;
  std::map<const Re*, uint32_t> set_of;

  uint32_t add_state() {
    out.emplace_back();
    return static_cast<uint32_t>(out.size() - 1);
  }
  void edge(uint32_t from, EdgeKind k, uint32_t to, uint32_t set = 0) { out[from].push_back({k, set, to}); }

  // Builds `r` starting at state `from`; returns its end state.
  uint32_t build(const Re& r, uint32_t from) {
    switch (r.kind) {
      case Re::Kind::chars: {
        auto [it, fresh] = set_of.emplace(&r, static_cast<uint32_t>(sets.size()));
        if (fresh) sets.push_back(r.set);
        const uint32_t s = add_state();
        edge(from, EdgeKind::chars, s, it->second);
        return s;
      }
      case Re::Kind::bol:
      case Re::Kind::eol: {
        const uint32_t s = add_state();
        edge(from, r.kind == Re::Kind::bol ? EdgeKind::bol : EdgeKind::eol, s);
        return s;
      }
      case Re::Kind::cat: {
        uint32_t cur = from;
        for (const auto& k : r.kids) cur = build(k, cur);
        return cur;
      }
      case Re::Kind::alt: {
        const uint32_t end = add_state();
        for (const auto& k : r.kids) {
          const uint32_t start = add_state();
          edge(from, EdgeKind::eps, start);
          edge(build(k, start), EdgeKind::eps, end);
        }
        return end;
      }
      case Re::Kind::rep: {
        uint32_t cur = from;
        for (int64_t i = 0; i < r.min; ++i) {
          const uint32_t start = add_state();
          edge(cur, EdgeKind::eps, start);
          cur = build(r.kids[0], start);
        }
        const uint32_t end = add_state();
        if (r.max < 0) {
          // loop: cur -> body -> loop, loop -> end
          const uint32_t loop = add_state();
          edge(cur, EdgeKind::eps, loop);
          edge(build(r.kids[0], loop), EdgeKind::eps, loop);
          edge(loop, EdgeKind::eps, end);
        } else {
          for (int64_t i = r.min; i < r.max; ++i) {
            edge(cur, EdgeKind::eps, end);
            const uint32_t start = add_state();
            edge(cur, EdgeKind::eps, start);
            cur = build(r.kids[0], start);
          }
          edge(cur, EdgeKind::eps, end);
        }
        return end;
      }
    }
    return from;
  }
};

constexpr uint64_t kMaxWork = 40'000'000;  // interval x edge and closure visits of one subset construction
constexpr uint64_t kMaxStored = 2'000'000;  // NFA states in the keys of one construction's DFA states

std::string too_many_states(const char* what) {
  return std::string(what) + " needs an automaton of more than " + std::to_string(kMaxDfaStates) +
         " states, over memra-host's limit; simplify it";
}

class SubsetBuilder {
 public:
  SubsetBuilder(const Nfa& nfa, uint32_t final_state) : nfa_(nfa), final_(final_state), mark_(nfa.out.size(), 0), post_(nfa.out.size(), 0) {}

  std::optional<AutomatonError> run(uint32_t start, Dfa& out) {
    std::vector<uint32_t> core;
    bool accept = false;
    closure({start}, true, core, accept);
    intern(core, accept, out);
    for (size_t q = 0; q < out.states.size(); ++q) {
      // Outgoing char edges of the state's core, cut into intervals on which they agree.
      const std::vector<uint32_t> members = members_[q];
      std::vector<std::pair<uint32_t, uint32_t>> edges;  // (set, to)
      std::vector<uint32_t> cuts;
      for (uint32_t s : members)
        for (const auto& e : nfa_.out[s])
          if (e.kind == Nfa::EdgeKind::chars) {
            edges.emplace_back(e.set, e.to);
            for (const auto& [lo, hi] : nfa_.sets[e.set].ranges) {
              cuts.push_back(lo);
              cuts.push_back(hi + 1);
            }
          }
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      std::vector<Dfa::Edge> result;
      for (size_t k = 0; k + 1 < cuts.size(); ++k) {
        work_ += edges.size();
        if (work_ > kMaxWork) return AutomatonError{"needs more work to compile than memra-host allows; simplify it", false};
        std::vector<uint32_t> seeds;
        for (const auto& [set, to] : edges)
          if (nfa_.sets[set].has(cuts[k])) seeds.push_back(to);
        if (seeds.empty()) continue;
        closure(seeds, false, core, accept);
        const uint32_t to = intern(core, accept, out);
        if (out.states.size() > kMaxDfaStates) return AutomatonError{too_many_states("it"), false};
        if (work_ > kMaxWork || stored_ > kMaxStored) return AutomatonError{"needs more work to compile than memra-host allows; simplify it", false};
        const uint32_t lo = cuts[k], hi = cuts[k + 1] - 1;
        if (!result.empty() && result.back().to == to && result.back().hi + 1 == lo) result.back().hi = hi;
        else result.push_back({lo, hi, to});
      }
      out.states[q].edges = std::move(result);
    }
    return std::nullopt;
  }

 private:
  // The states reachable from `seeds` without reading a character (^ only at the start): those
  // with character edges form the DFA state; it accepts when the final state is reachable,
  // also through '$' (the end of the string). Reaching the final state without '$' means a
  // match was found: any continuation accepts, so the state is just the final one.
  void closure(const std::vector<uint32_t>& seeds, bool at_start, std::vector<uint32_t>& core, bool& accept) {
    ++stamp_;
    core.clear();
    accept = false;
    std::vector<std::pair<uint32_t, bool>> stack;  // (state, after '$')
    for (uint32_t s : seeds) stack.emplace_back(s, false);
    bool found = false;
    while (!stack.empty()) {
      auto [s, post] = stack.back();
      stack.pop_back();
      auto& m = post ? post_ : mark_;
      if (m[s] == stamp_) continue;
      m[s] = stamp_;
      ++work_;
      if (s == final_) {
        accept = true;
        if (!post) found = true;
      }
      bool has_chars = false;
      for (const auto& e : nfa_.out[s]) {
        switch (e.kind) {
          case Nfa::EdgeKind::eps: stack.emplace_back(e.to, post); break;
          case Nfa::EdgeKind::bol:
            if (at_start) stack.emplace_back(e.to, post);
            break;
          case Nfa::EdgeKind::eol: stack.emplace_back(e.to, true); break;
          case Nfa::EdgeKind::chars: has_chars = true; break;
        }
      }
      if (has_chars && !post) core.push_back(s);
    }
    if (found) {
      core.assign(1, final_);
      return;
    }
    std::sort(core.begin(), core.end());
    core.erase(std::unique(core.begin(), core.end()), core.end());
  }

  uint32_t intern(const std::vector<uint32_t>& core, bool accept, Dfa& out) {
    std::vector<uint32_t> key = core;
    key.push_back(accept ? 1 : 0);
    auto [it, fresh] = ids_.emplace(std::move(key), static_cast<uint32_t>(out.states.size()));
    if (fresh) {
      out.states.push_back({accept, {}});
      members_.push_back(core);
      stored_ += core.size() + 1;
    }
    return it->second;
  }

  const Nfa& nfa_;
  uint32_t final_;
  std::vector<uint32_t> mark_, post_;
  uint32_t stamp_ = 0;
  uint64_t work_ = 0;
  uint64_t stored_ = 0;  // NFA states held by the DFA states' keys
  std::map<std::vector<uint32_t>, uint32_t> ids_;
  std::vector<std::vector<uint32_t>> members_;
};

}  // namespace

bool string_matches(const Dfa& d, std::string_view utf8) {
  std::u32string text;
  return decode_utf8(utf8, text) && d.matches(text);
}

std::optional<AutomatonError> compile_pattern(std::string_view pattern, Dfa& out) {
  out = Dfa{};
  std::u32string text;
  if (!decode_utf8(pattern, text)) return AutomatonError{"is not valid UTF-8", false};
  Re re;
  RegexParser parser(std::move(text));
  if (auto e = parser.parse(re)) return e;
  if (nfa_size(re) > kMaxNfaStates) {
    return AutomatonError{"unrolls to more than " + std::to_string(kMaxNfaStates) +
                              " automaton states (quantifier counts multiply), over memra-host's limit",
                          false};
  }
  // S0 loops on any character (a match may start anywhere), F loops too (anything may follow
  // a match); ^ and $ pin the match to the ends.
  Nfa nfa;
  nfa.sets.push_back(CharSet::any());
  const uint32_t s0 = nfa.add_state();
  const uint32_t fin = nfa.add_state();
  const uint32_t start = nfa.add_state();
  nfa.edge(s0, Nfa::EdgeKind::chars, s0, 0);
  nfa.edge(s0, Nfa::EdgeKind::eps, start);
  nfa.edge(nfa.build(re, start), Nfa::EdgeKind::eps, fin);
  nfa.edge(fin, Nfa::EdgeKind::chars, fin, 0);
  SubsetBuilder sb(nfa, fin);
  if (auto e = sb.run(s0, out)) return e;
  trim(out);
  return std::nullopt;
}

// ---- Products and trimming -------------------------------------------------------------

namespace {

template <class Step>
std::optional<AutomatonError> product(size_t first, Step step, Dfa& out, const char* what) {
  // Breadth-first over pairs encoded as uint64 keys; step(key, edges_out, accept_out).
  out = Dfa{};
  std::map<uint64_t, uint32_t> ids;
  std::vector<uint64_t> keys;
  auto id = [&](uint64_t key) {
    auto [it, fresh] = ids.emplace(key, static_cast<uint32_t>(keys.size()));
    if (fresh) keys.push_back(key);
    return it->second;
  };
  id(first);
  for (size_t q = 0; q < keys.size(); ++q) {
    if (keys.size() > kMaxDfaStates) return AutomatonError{too_many_states(what), false};
    std::vector<std::tuple<uint32_t, uint32_t, uint64_t>> edges;
    bool accept = false;
    step(keys[q], edges, accept);
    Dfa::State st;
    st.accept = accept;
    for (const auto& [lo, hi, key] : edges) st.edges.push_back({lo, hi, id(key)});
    out.states.push_back(std::move(st));
  }
  return std::nullopt;
}

}  // namespace

std::optional<AutomatonError> intersect(const Dfa& a, const Dfa& b, Dfa& out) {
  if (a.states.empty() || b.states.empty()) {
    out = Dfa{};
    return std::nullopt;
  }
  auto step = [&](uint64_t key, std::vector<std::tuple<uint32_t, uint32_t, uint64_t>>& edges, bool& accept) {
    const auto& x = a.states[key >> 32];
    const auto& y = b.states[key & 0xFFFFFFFFu];
    accept = x.accept && y.accept;
    size_t i = 0, j = 0;
    while (i < x.edges.size() && j < y.edges.size()) {
      const uint32_t lo = std::max(x.edges[i].lo, y.edges[j].lo);
      const uint32_t hi = std::min(x.edges[i].hi, y.edges[j].hi);
      if (lo <= hi) edges.emplace_back(lo, hi, (uint64_t{x.edges[i].to} << 32) | y.edges[j].to);
      if (x.edges[i].hi < y.edges[j].hi) ++i;
      else ++j;
    }
  };
  auto e = product(0, step, out, "the intersection of 'pattern' and 'format'");
  if (!e) trim(out);
  return e;
}

std::optional<AutomatonError> bound_length(const Dfa& d, int64_t lo, int64_t hi, Dfa& out) {
  if (d.states.empty()) {
    out = Dfa{};
    return std::nullopt;
  }
  auto step = [&](uint64_t key, std::vector<std::tuple<uint32_t, uint32_t, uint64_t>>& edges, bool& accept) {
    const auto& x = d.states[key >> 32];
    const auto n = static_cast<int64_t>(key & 0xFFFFFFFFu);
    accept = x.accept && n >= lo;
    if (hi >= 0 && n >= hi) return;
    const uint64_t next = static_cast<uint64_t>(hi >= 0 ? n + 1 : std::min(n + 1, lo));
    for (const auto& e : x.edges) edges.emplace_back(e.lo, e.hi, (uint64_t{e.to} << 32) | next);
  };
  auto e = product(0, step, out, "the length bounds with 'pattern' or 'format'");
  if (!e) trim(out);
  return e;
}

bool trim(Dfa& d) {
  const size_t n = d.states.size();
  if (n == 0) return false;
  std::vector<char> reach(n, 0), live(n, 0);
  std::vector<uint32_t> stack{0};
  reach[0] = 1;
  std::vector<std::vector<uint32_t>> rev(n);
  while (!stack.empty()) {
    const uint32_t q = stack.back();
    stack.pop_back();
    for (const auto& e : d.states[q].edges) {
      rev[e.to].push_back(q);
      if (!reach[e.to]) {
        reach[e.to] = 1;
        stack.push_back(e.to);
      }
    }
  }
  for (uint32_t q = 0; q < n; ++q)
    if (reach[q] && d.states[q].accept) {
      live[q] = 1;
      stack.push_back(q);
    }
  while (!stack.empty()) {
    const uint32_t q = stack.back();
    stack.pop_back();
    for (uint32_t p : rev[q])
      if (!live[p]) {
        live[p] = 1;
        stack.push_back(p);
      }
  }
  if (!live[0]) {
    d.states.clear();
    return false;
  }
  std::vector<uint32_t> renum(n, UINT32_MAX);
  uint32_t next = 0;
  for (uint32_t q = 0; q < n; ++q)
    if (live[q]) renum[q] = next++;
  Dfa t;
  t.states.reserve(next);
  for (uint32_t q = 0; q < n; ++q) {
    if (!live[q]) continue;
    Dfa::State s;
    s.accept = d.states[q].accept;
    for (const auto& e : d.states[q].edges)
      if (live[e.to]) {
        const uint32_t to = renum[e.to];
        if (!s.edges.empty() && s.edges.back().to == to && s.edges.back().hi + 1 == e.lo) s.edges.back().hi = e.hi;
        else s.edges.push_back({e.lo, e.hi, to});
      }
    t.states.push_back(std::move(s));
  }
  d = std::move(t);
  return true;
}

// ---- Lowering into the byte grammar ------------------------------------------------------

std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> out;
  std::vector<std::pair<uint32_t, uint32_t>> work{{lo, hi}};
  auto encode = [](uint32_t c, uint8_t* b) {
    if (c < 0x80) {
      b[0] = static_cast<uint8_t>(c);
      return 1;
    }
    if (c < 0x800) {
      b[0] = static_cast<uint8_t>(0xC0 | (c >> 6));
      b[1] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return 2;
    }
    if (c < 0x10000) {
      b[0] = static_cast<uint8_t>(0xE0 | (c >> 12));
      b[1] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
      b[2] = static_cast<uint8_t>(0x80 | (c & 0x3F));
      return 3;
    }
    b[0] = static_cast<uint8_t>(0xF0 | (c >> 18));
    b[1] = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
    b[2] = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
    b[3] = static_cast<uint8_t>(0x80 | (c & 0x3F));
    return 4;
  };
  while (!work.empty()) {
    auto [a, z] = work.back();
    work.pop_back();
    if (a > z) continue;
    // One encoded length per piece.
    bool split = false;
    for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
      if (a <= edge && z > edge) {
        work.emplace_back(edge + 1, z);
        work.emplace_back(a, edge);
        split = true;
        break;
      }
    }
    if (split) continue;
    if (z < 0x80) {
      out.push_back({{static_cast<uint8_t>(a), static_cast<uint8_t>(z)}});
      continue;
    }
    // Cut until every continuation byte's range is whole (0x80..0xBF) below the first that differs.
    for (int i = 1; i < 4 && !split; ++i) {
      const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
      if ((a & ~m) != (z & ~m)) {
        if ((a & m) != 0) {
          work.emplace_back((a | m) + 1, z);
          work.emplace_back(a, a | m);
          split = true;
        } else if ((z & m) != m) {
          work.emplace_back(z & ~m, z);
          work.emplace_back(a, (z & ~m) - 1);
          split = true;
        }
      }
    }
    if (split) continue;
    uint8_t ba[4], bz[4];
    const int n = encode(a, ba);
    encode(z, bz);
    std::vector<std::pair<uint8_t, uint8_t>> seq_bytes;
    for (int i = 0; i < n; ++i) seq_bytes.emplace_back(ba[i], bz[i]);
    out.push_back(std::move(seq_bytes));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

// Printable characters written as themselves ('"' and '\' are escaped, controls too).
bool literal_ascii_only(const CharSet& s) {
  for (const auto& [lo, hi] : s.ranges)
    if (lo < 0x20 || hi > 0x7F || (lo <= '"' && '"' <= hi) || (lo <= '\\' && '\\' <= hi)) return false;
  return true;
}

ExprPtr byte_class(uint8_t lo, uint8_t hi) { return cls(ByteSet::range(lo, hi)); }

// The alternatives that write one character of `s` inside a JSON string.
std::vector<ExprPtr> encodings(const CharSet& s) {
  std::vector<ExprPtr> alts;
  ByteSet ascii;
  bool any_ascii = false;
  const CharSet literal = s.intersect(CharSet::of('"', '"').add('\\', '\\').add(0, 0x1F).complement());
  for (const auto& [lo, hi] : literal.ranges) {
    for (const auto& sq : utf8_sequences(lo, hi)) {
      if (sq.size() == 1) {
        ascii.add_range(sq[0].first, sq[0].second);
        any_ascii = true;
        continue;
      }
      std::vector<ExprPtr> parts;
      for (const auto& [a, z] : sq) parts.push_back(byte_class(a, z));
      alts.push_back(seq(std::move(parts)));
    }
  }
  if (any_ascii) alts.insert(alts.begin(), cls(ascii));
  if (s.has('"')) alts.push_back(lit("\\\""));
  if (s.has('\\')) alts.push_back(lit("\\\\"));
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!s.has(c)) continue;
    const char* short_escape = c == 8 ? "\\b" : c == 9 ? "\\t" : c == 10 ? "\\n" : c == 12 ? "\\f" : c == 13 ? "\\r" : nullptr;
    if (short_escape) {
      alts.push_back(lit(short_escape));
    } else {
      const char hexdigits[] = "0123456789abcdef";
      const char low = hexdigits[c & 15];
      ByteSet last = ByteSet{}.add(static_cast<uint8_t>(low));
      if (low >= 'a') last.add(static_cast<uint8_t>(low - 'a' + 'A'));
      alts.push_back(seq({lit("\\u00"), cls(ByteSet{}.add(static_cast<uint8_t>(hexdigits[c >> 4]))), cls(last)}));
    }
  }
  return alts;
}

// Per state: (the characters, the target) of its edges, grouped by target.
std::vector<std::pair<CharSet, uint32_t>> by_target(const Dfa::State& st) {
  std::map<uint32_t, CharSet> m;
  for (const auto& e : st.edges) m[e.to].ranges.emplace_back(e.lo, e.hi);
  std::vector<std::pair<CharSet, uint32_t>> out;
  for (auto& [to, set] : m) {
    CharSet s;
    s.add(set);  // normalise
    out.emplace_back(std::move(s), to);
  }
  return out;
}

uint64_t define_cost(const std::vector<ExprPtr>& alts) {
  uint64_t c = 0;
  for (const auto& a : alts) c += GrammarBuilder::cost(a) + 1;
  return c;
}

}  // namespace

uint64_t json_string_cost(const Dfa& d) {
  uint64_t cost = 2;  // '"' and the reference to the start
  std::map<CharSet, bool> shared;
  for (const auto& st : d.states) {
    if (st.accept) cost += 2;
    for (const auto& [set, to] : by_target(st)) {
      cost += 3;
      if (!literal_ascii_only(set) && shared.emplace(set, true).second) cost += define_cost(encodings(set));
    }
  }
  return cost;
}

ExprPtr json_string(const Dfa& d, GrammarBuilder& b) {
  std::vector<uint32_t> rules(d.states.size());
  for (auto& r : rules) r = b.declare();
  std::map<CharSet, uint32_t> shared;
  for (size_t q = 0; q < d.states.size(); ++q) {
    std::vector<ExprPtr> alts;
    if (d.states[q].accept) alts.push_back(cls(ByteSet::of("\"")));
    for (const auto& [set, to] : by_target(d.states[q])) {
      ExprPtr one;
      if (literal_ascii_only(set)) {
        ByteSet bytes;
        for (const auto& [lo, hi] : set.ranges) bytes.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
        one = cls(bytes);
      } else {
        auto it = shared.find(set);
        if (it == shared.end()) it = shared.emplace(set, b.add(alt(encodings(set)))).first;
        one = ref(it->second);
      }
      alts.push_back(seq({one, ref(rules[to])}));
    }
    b.define(rules[q], alt(std::move(alts)));
  }
  return seq({cls(ByteSet::of("\"")), ref(rules[0])});
}

// ---- Formats ---------------------------------------------------------------------------

namespace {

std::string ipv4_regex() {
  const std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  return "(?:" + octet + "\\.){3}" + octet;
}

std::string ipv6_regex() {
  // RFC 3986's IPv6address, every form of '::' and the embedded IPv4 tail.
  const std::string h = "[0-9A-Fa-f]{1,4}";
  const std::string ls32 = "(?:" + h + ":" + h + "|" + ipv4_regex() + ")";
  auto upto = [&](int n) { return "(?:(?:" + h + ":){0," + std::to_string(n) + "}" + h + ")?"; };
  return "(?:(?:" + h + ":){6}" + ls32 + "|::(?:" + h + ":){5}" + ls32 + "|(?:" + h + ")?::(?:" + h + ":){4}" + ls32 + "|" +
         upto(1) + "::(?:" + h + ":){3}" + ls32 + "|" + upto(2) + "::(?:" + h + ":){2}" + ls32 + "|" + upto(3) + "::" + h +
         ":" + ls32 + "|" + upto(4) + "::" + ls32 + "|" + upto(5) + "::" + h + "|" + upto(6) + "::)";
}

std::string date_regex() {
  // Days per month, February 29th only in leap years (every 4th, not every 100th, every 400th).
  const std::string leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[048]|[2468][048]|[13579][26])00)";
  return "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|" +
         leap + "-02-29)";
}

std::string time_regex() {
  const std::string hour = "(?:[01][0-9]|2[0-3])", minute = "[0-5][0-9]";
  return hour + ":" + minute + ":" + minute + "(?:\\.[0-9]{1,9})?(?:Z|[+-]" + hour + ":" + minute + ")";
}

std::string duration_regex() {
  // RFC 3339 appendix A: P then date parts (Y M D, each after the one before it) and/or T with
  // time parts (H M S), or weeks.
  const std::string n = "[0-9]+";
  const std::string time = "T(?:" + n + "H(?:" + n + "M(?:" + n + "S)?)?|" + n + "M(?:" + n + "S)?|" + n + "S)";
  const std::string date = "(?:" + n + "Y(?:" + n + "M(?:" + n + "D)?)?|" + n + "M(?:" + n + "D)?|" + n + "D)";
  return "P(?:" + date + "(?:" + time + ")?|" + time + "|" + n + "W)";
}

std::string hostname_regex() {
  const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?";
  return label + "(?:\\." + label + ")*";
}

std::string email_regex() {
  const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
  const std::string label = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?";
  return atext + "(?:\\." + atext + ")*@(?:" + label + "\\.)+" + label;
}

struct FormatDef {
  const char* name;
  std::string regex;
  int64_t max_length;  // < 0: none
};

std::map<std::string, Dfa, std::less<>> build_formats() {
  // Hostnames and emails are kept to 63 / 64 characters in all, so that every label (63) and
  // the whole (253; an email's local part 64) fit RFC 1123 / 5321 without counting each.
  const std::vector<FormatDef> defs = {
      {"date", date_regex(), -1},
      {"time", time_regex(), -1},
      {"date-time", date_regex() + "T" + time_regex(), -1},
      {"duration", duration_regex(), -1},
      {"email", email_regex(), 64},
      {"hostname", hostname_regex(), 63},
      {"ipv4", ipv4_regex(), -1},
      {"ipv6", ipv6_regex(), -1},
      {"uuid", "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", -1},
  };
  std::map<std::string, Dfa, std::less<>> out;
  for (const auto& f : defs) {
    Dfa d;
    if (compile_pattern("^(?:" + f.regex + ")$", d)) continue;  // never: the tests compile each
    if (f.max_length >= 0) {
      Dfa bounded;
      if (bound_length(d, 0, f.max_length, bounded)) continue;
      d = std::move(bounded);
    }
    out.emplace(f.name, std::move(d));
  }
  return out;
}

}  // namespace

const Dfa* format_automaton(std::string_view format) {
  static const std::map<std::string, Dfa, std::less<>> formats = build_formats();
  auto it = formats.find(format);
  return it == formats.end() ? nullptr : &it->second;
}

}  // namespace memra::structured
