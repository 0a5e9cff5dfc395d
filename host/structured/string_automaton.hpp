// The content of a JSON string as a deterministic automaton over Unicode code points, for
// the schema keywords that constrain it beyond its length: `pattern` (an ECMAScript regular
// expression, the subset schemas use) and `format` (date, time, date-time, duration, email,
// hostname, ipv4, ipv6, uuid), intersected with each other and with minLength / maxLength,
// then lowered into the byte grammar (grammar.hpp) as the JSON text of such a string.
//
// Everything is bounded before it is built: a quantifier's count and the automaton a regex
// unrolls to are measured from the parse (nothing is expanded to find out), the subset and
// product constructions stop at kMaxDfaStates and a work budget, so a hostile pattern is an
// error in milliseconds, never a stall.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/structured/grammar.hpp"

namespace memra::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
// The most states an automaton may have (a subset construction, an intersection, a length
// bound's product); past it the keyword is refused.
inline constexpr size_t kMaxDfaStates = 20'000;
// The most automaton states a regex may unroll to (its quantifiers' counts multiply).
inline constexpr size_t kMaxNfaStates = 20'000;
// The largest count of one regex quantifier ({m,n}).
inline constexpr int64_t kMaxRepeat = 1'000;

// A set of Unicode scalar values (no surrogates): sorted, disjoint, non-adjacent ranges.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  static CharSet of(uint32_t lo, uint32_t hi);
  static CharSet any();
  CharSet& add(uint32_t lo, uint32_t hi);
  CharSet& add(const CharSet& other);
  CharSet complement() const;
  CharSet intersect(const CharSet& other) const;
  bool empty() const { return ranges.empty(); }
  bool has(uint32_t c) const;
  bool operator==(const CharSet&) const = default;
  bool operator<(const CharSet& o) const { return ranges < o.ranges; }
};

// A deterministic automaton over code points; state 0 is the start. Edges of a state are
// sorted by `lo` and disjoint; a missing edge rejects.
struct Dfa {
  struct Edge {
    uint32_t lo, hi, to;
  };
  struct State {
    bool accept = false;
    std::vector<Edge> edges;
  };
  std::vector<State> states;
  // Whether the automaton accepts `text` (UTF-32).
  bool matches(std::u32string_view text) const;
};

// Whether `d` accepts the UTF-8 text (false for malformed UTF-8).
bool string_matches(const Dfa& d, std::string_view utf8);

struct AutomatonError {
  std::string message;       // what is wrong, without the keyword's name or place
  bool unsupported = true;   // false: the input is invalid rather than beyond memra
};

// The strings a JSON Schema `pattern` matches: ECMAScript semantics with the u flag (code
// points), unanchored as JSON Schema has it (a match anywhere; ^ and $ anchor it). Supported:
// literals, escapes (\d \D \w \W \s \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} and escaped
// punctuation), classes with ranges and negation, '.', groups ((...), (?:...), (?<name>...)),
// alternation, quantifiers (* + ? {m} {m,} {m,n}, lazy or not) and the anchors ^ $. Refused by
// name: backreferences, lookahead / lookbehind, \b \B, \p{...}, and quantifier counts over
// kMaxRepeat or automata past the limits above.
std::optional<AutomatonError> compile_pattern(std::string_view pattern, Dfa& out);

// The automaton of a `format` memra enforces (date, time, date-time, duration, email,
// hostname, ipv4, ipv6, uuid), or null. Each accepts a subset of the format's RFC grammar
// (docs/SERVING.md lists what is left out); compiled once.
const Dfa* format_automaton(std::string_view format);

// Strings both accept.
std::optional<AutomatonError> intersect(const Dfa& a, const Dfa& b, Dfa& out);
// Strings of `d` with lo..hi code points (hi < 0: no upper bound).
std::optional<AutomatonError> bound_length(const Dfa& d, int64_t lo, int64_t hi, Dfa& out);
// Drops the states from which no accepting state is reachable (and the unreachable ones);
// false when the start is one of them: no string matches.
bool trim(Dfa& d);

// The grammar elements json_string() adds for `d` (the rules of its states and of the
// character encodings it shares), computed without building anything.
uint64_t json_string_cost(const Dfa& d);
// The JSON text of a string whose content `d` accepts: '"', the characters (printable ones
// as UTF-8, '"' and '\' and controls escaped), '"'. `d` must be trimmed.
ExprPtr json_string(const Dfa& d, GrammarBuilder& b);

// UTF-8 byte-range sequences of the code points lo..hi (no surrogates), for the grammar.
std::vector<std::vector<std::pair<uint8_t, uint8_t>>> utf8_sequences(uint32_t lo, uint32_t hi);

}  // namespace memra::structured
