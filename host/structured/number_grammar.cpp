#include "host/structured/number_grammar.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

namespace memra::structured {

namespace {

constexpr int64_t kMaxMagnitude = 9'999'999'999'999'999;  // 16 digits

ExprPtr digit_cls(int a, int b) { return cls(ByteSet::range(static_cast<uint8_t>('0' + a), static_cast<uint8_t>('0' + b))); }

bool all(const std::string& s, size_t from, char c) { return s.find_first_not_of(c, from) == std::string::npos; }

// The equal-length digit strings a..b (a <= b).
ExprPtr same_length(const std::string& a, const std::string& b) {
  if (a.empty()) return seq({});
  if (a == b) return lit(a);
  const int a0 = a[0] - '0', b0 = b[0] - '0';
  const size_t rest = a.size() - 1;
  if (a0 == b0) return seq({digit_cls(a0, a0), same_length(a.substr(1), b.substr(1))});
  std::vector<ExprPtr> alts;
  int from = a0, to = b0;
  if (!all(a, 1, '0')) {  // a0 followed by a[1..] up to 99..9
    alts.push_back(seq({digit_cls(a0, a0), same_length(a.substr(1), std::string(rest, '9'))}));
    from = a0 + 1;
  }
  if (!all(b, 1, '9')) {  // b0 followed by 00..0 up to b[1..]
    alts.push_back(seq({digit_cls(b0, b0), same_length(std::string(rest, '0'), b.substr(1))}));
    to = b0 - 1;
  }
  if (from <= to) alts.push_back(seq({digit_cls(from, to), rep(digit_cls(0, 9), static_cast<int64_t>(rest), static_cast<int64_t>(rest))}));
  return alt(std::move(alts));
}

// The decimal texts of p..q (0 <= p <= q <= kMaxMagnitude), without leading zeros.
ExprPtr nonnegative_range(int64_t p, int64_t q) {
  std::vector<ExprPtr> alts;
  int64_t low = 0, high = 9;  // the range of numbers with `len` digits
  for (int len = 1; len <= kMaxNumberDigits; ++len) {
    const int64_t lo = std::max(p, low), hi = std::min(q, high);
    if (lo <= hi) alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
    low = high + 1;
    if (len < kMaxNumberDigits) high = high * 10 + 9;
  }
  return alt(std::move(alts));
}

struct Magnitude {
  bool big = false;  // more integer digits than a number may have
  int64_t int_part = 0;
  std::string frac;  // fraction digits, no trailing zeros
};

Magnitude magnitude_of(double v) {
  const Decimal d = decimal_of(v);
  Magnitude m;
  m.frac = d.frac_digits;
  if (d.int_digits.size() > static_cast<size_t>(kMaxNumberDigits)) m.big = true;
  else m.int_part = std::stoll(d.int_digits);
  return m;
}

struct End {
  Magnitude v;
  bool open = false;
};

// The fraction of a number (nothing, or '.' and 1..16 digits) given its integer part equals
// the lower end's (lower) and/or the upper end's (upper): a digit automaton that stays "tight"
// with an end while its digits equal the end's, and is free once they pass it.
class Fractions {
 public:
  explicit Fractions(GrammarBuilder& b) : b_(b) {}

  ExprPtr part(const End* lower, const End* upper) {
    lower_ = lower;
    upper_ = upper;
    memo_.clear();
    std::vector<ExprPtr> alts;
    if (end_ok(0, lower != nullptr, upper != nullptr)) alts.push_back(seq({}));
    for (const auto& [d0, d1, rule] : digits(0, lower != nullptr, upper != nullptr))
      alts.push_back(seq({cls(ByteSet::of(".")), digit_cls(d0, d1), ref(rule)}));
    if (alts.empty()) return nullptr;
    return alt(std::move(alts));
  }

 private:
  static int digit_at(const std::string& s, int i) { return i < static_cast<int>(s.size()) ? s[static_cast<size_t>(i)] - '0' : 0; }

  // Whether the fraction may end after i digits (its remaining digits are zeros).
  bool end_ok(int i, bool lt, bool ht) const {
    bool ok = true;
    if (lt) ok = i >= static_cast<int>(lower_->v.frac.size()) && !lower_->open;  // equal to the end, or below it
    if (ht && i >= static_cast<int>(upper_->v.frac.size())) ok = ok && !upper_->open;  // equal; below is fine
    return ok;
  }

  // Digit d at position i: groups of consecutive digits leading to the same state, with its rule.
  std::vector<std::tuple<int, int, uint32_t>> digits(int i, bool lt, bool ht) {
    std::vector<std::tuple<int, int, uint32_t>> out;
    if (i >= kMaxNumberDigits) return out;
    int d = 0;
    while (d <= 9) {
      auto next = [&](int x, bool& nl, bool& nh) {
        nl = lt && x == digit_at(lower_->v.frac, i);
        nh = ht && x == digit_at(upper_->v.frac, i);
        return !(lt && x < digit_at(lower_->v.frac, i)) && !(ht && x > digit_at(upper_->v.frac, i));
      };
      bool nl = false, nh = false;
      if (!next(d, nl, nh)) {
        ++d;
        continue;
      }
      int e = d;
      bool el = false, eh = false;
      while (e + 1 <= 9 && next(e + 1, el, eh) && el == nl && eh == nh) ++e;
      if (auto r = state(i + 1, nl, nh)) out.emplace_back(d, e, *r);
      d = e + 1;
    }
    return out;
  }

  std::optional<uint32_t> state(int i, bool lt, bool ht) {
    if (!lt && !ht) return free_rule(i);
    const int key = i * 4 + (lt ? 2 : 0) + (ht ? 1 : 0);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    std::vector<ExprPtr> alts;
    if (end_ok(i, lt, ht)) alts.push_back(seq({}));
    for (const auto& [d0, d1, rule] : digits(i, lt, ht)) alts.push_back(seq({digit_cls(d0, d1), ref(rule)}));
    std::optional<uint32_t> r;
    if (!alts.empty()) r = b_.add(alt(std::move(alts)));
    memo_[key] = r;
    return r;
  }

  // Any digits from position i to the limit: F_i ::= "" | [0-9] F_{i+1}.
  uint32_t free_rule(int i) {
    if (free_.empty()) {
      free_.resize(static_cast<size_t>(kMaxNumberDigits) + 1);
      free_[static_cast<size_t>(kMaxNumberDigits)] = b_.add(seq({}));
      for (int k = kMaxNumberDigits - 1; k >= 0; --k)
        free_[static_cast<size_t>(k)] = b_.add(alt({seq({}), seq({digit_cls(0, 9), ref(free_[static_cast<size_t>(k) + 1])})}));
    }
    return free_[static_cast<size_t>(i)];
  }

  GrammarBuilder& b_;
  const End* lower_ = nullptr;
  const End* upper_ = nullptr;
  std::map<int, std::optional<uint32_t>> memo_;
  std::vector<uint32_t> free_;
};

// Magnitudes (integer part and fraction) from `a` up to `b` (none: no bound; only the digit
// limits), or null when none is writable.
ExprPtr magnitudes(const End& a, const std::optional<End>& b, Fractions& fractions) {
  if (a.v.big) return nullptr;
  const bool free = !b || b->v.big;
  if (!free && a.v.int_part > b->v.int_part) return nullptr;
  if (!free && a.v.int_part == b->v.int_part) {
    ExprPtr f = fractions.part(&a, &*b);
    return f ? seq({lit(std::to_string(a.v.int_part)), f}) : nullptr;
  }
  std::vector<ExprPtr> alts;
  if (ExprPtr f = fractions.part(&a, nullptr)) alts.push_back(seq({lit(std::to_string(a.v.int_part)), f}));
  const int64_t top = free ? kMaxMagnitude : b->v.int_part - 1;
  if (a.v.int_part + 1 <= top) alts.push_back(seq({nonnegative_range(a.v.int_part + 1, top), fractions.part(nullptr, nullptr)}));
  if (!free)
    if (ExprPtr f = fractions.part(nullptr, &*b)) alts.push_back(seq({lit(std::to_string(b->v.int_part)), f}));
  if (alts.empty()) return nullptr;
  return alt(std::move(alts));
}

}  // namespace

Decimal decimal_of(double v) {
  std::string t = nlohmann::json(std::fabs(v)).dump();  // the shortest text that reads back as v
  long exponent = 0;
  if (const size_t e = t.find_first_of("eE"); e != std::string::npos) {
    exponent = std::stol(t.substr(e + 1));
    t.resize(e);
  }
  const size_t dot = t.find('.');
  const std::string ip = t.substr(0, dot), fp = dot == std::string::npos ? "" : t.substr(dot + 1);
  const std::string digits = ip + fp;
  const long point = static_cast<long>(ip.size()) + exponent;  // value = 0.digits x 10^point
  Decimal d;
  if (point <= 0) {
    d.int_digits = "0";
    d.frac_digits = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (point >= static_cast<long>(digits.size())) {
    d.int_digits = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    d.int_digits = digits.substr(0, static_cast<size_t>(point));
    d.frac_digits = digits.substr(static_cast<size_t>(point));
  }
  const size_t nz = d.int_digits.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : d.int_digits.substr(nz);
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  return d;
}

ExprPtr integer_range(int64_t lo, int64_t hi) {
  std::vector<ExprPtr> alts;
  if (hi >= 0) alts.push_back(nonnegative_range(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back(seq({cls(ByteSet::of("-")), nonnegative_range(std::max<int64_t>(1, -hi), -lo)}));
  return alt(std::move(alts));
}

ExprPtr number_range(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi, GrammarBuilder& b) {
  // Exclusive ends become inclusive ones at the next double inward (see the header).
  std::optional<double> l, h;
  if (lo) l = lo->exclusive ? std::nextafter(lo->value, HUGE_VAL) : lo->value;
  if (hi) h = hi->exclusive ? std::nextafter(hi->value, -HUGE_VAL) : hi->value;
  if (l && h && *l > *h) return nullptr;
  Fractions fractions(b);
  std::vector<ExprPtr> alts;
  if (!h || *h >= 0) {  // x >= 0, written without a sign
    const End a{l && *l > 0 ? magnitude_of(*l) : Magnitude{}, false};
    std::optional<End> z;
    if (h) z = End{magnitude_of(*h), false};
    if (ExprPtr e = magnitudes(a, z, fractions)) alts.push_back(e);
  }
  if (!l || *l < 0) {  // x < 0: '-' and a magnitude above 0 (never "-0")
    const End a = h && *h < 0 ? End{magnitude_of(*h), false} : End{Magnitude{}, true};
    std::optional<End> z;
    if (l) z = End{magnitude_of(*l), false};
    if (ExprPtr e = magnitudes(a, z, fractions)) alts.push_back(seq({cls(ByteSet::of("-")), e}));
  }
  if (alts.empty()) return nullptr;
  return alt(std::move(alts));
}

}  // namespace memra::structured
