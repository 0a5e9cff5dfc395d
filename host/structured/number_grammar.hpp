// Integers and numbers within bounds (JSON Schema minimum / maximum / exclusiveMinimum /
// exclusiveMaximum) as the exact decimal language of the range, built digit by digit (as
// llama.cpp's json-schema-to-grammar builds integer ranges): no out-of-range text is ever in
// the grammar, and every in-range text of the grammar's shape is.
//
// Shape: integers as JSON writes them ("0", "-7", no leading zeros, never "-0"); a bounded
// integer stays within +-(2^53 - 1), so a validator comparing doubles sees exactly the
// decimal's value. Numbers without an exponent: at most 16 integer digits and 16 fraction
// digits. Number bounds are compared as the double the schema's bound parses to (what
// validators do): an inclusive bound B admits the decimals >= / <= B's shortest text (double
// rounding is monotone, so the output's double is in bounds too); an exclusive bound admits
// those beyond the next double past B, so the output's double can never round onto B.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "host/structured/grammar.hpp"

namespace memra::structured {

inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;
inline constexpr int kMaxNumberDigits = 16;  // integer digits, and fraction digits, of a number

// The decimal texts of the integers lo..hi (lo <= hi, both within +-kMaxSafeInteger).
ExprPtr integer_range(int64_t lo, int64_t hi);

// One end of a number range, as the schema gives it.
struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// The texts of the numbers within the bounds (either may be absent), or null when no number
// of the shape above is within them. `b` holds the rules of the fraction digits' automaton.
ExprPtr number_range(const std::optional<NumberBound>& lo, const std::optional<NumberBound>& hi, GrammarBuilder& b);

// The exact decimal digits of the shortest text of `v` (|v|): integer part without leading
// zeros ("0" for none), fraction without trailing zeros. For tests and number_range.
struct Decimal {
  std::string int_digits, frac_digits;
};
Decimal decimal_of(double v);

}  // namespace memra::structured
