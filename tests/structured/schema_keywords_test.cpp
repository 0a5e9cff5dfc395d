// JSON Schema keywords beyond the object/array skeleton (#46 item 3): numeric bounds,
// lengths, pattern and format, each compiled into the grammar. A grammar must take exactly
// the in-bounds texts: integers -1000..1000 are enumerated against each range, numbers
// against double comparisons (what validators do), patterns against std::regex's
// ECMAScript engine, formats against independent checks (std::chrono's calendar,
// inet_pton, hand-written RFC rules); and random sentences of each grammar (what a model
// under a working mask can write) must all pass the same oracles. Schemas built to exhaust
// the compiler are refused by name in well under a second.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "host/structured/json_grammar.hpp"
#include "host/structured/number_grammar.hpp"
#include "host/structured/string_automaton.hpp"
#include "tests/structured/grammar_test_support.hpp"

using namespace memra::structured;
using namespace memra::structured::testing;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The content of a JSON string text (the grammar's output), as UTF-8.
std::string content(const std::string& text) { return json::parse(text).get<std::string>(); }

size_t code_points(const std::string& utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// ---- numbers ----

struct Range {
  const char* schema;  // the bounds, merged into {"type": T}
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;
  bool in(double v) const {
    if (lo && (lo_open ? !(v > *lo) : !(v >= *lo))) return false;
    if (hi && (hi_open ? !(v < *hi) : !(v <= *hi))) return false;
    return true;
  }
};

Grammar typed(const char* type, const char* bounds) {
  json s = json::parse(bounds);
  s["type"] = type;
  return compile(s.dump());
}

const std::vector<Range>& integer_ranges() {
  static const std::vector<Range> r = {
      {R"({"minimum":1})", 1.0, std::nullopt},
      {R"({"minimum":-37,"maximum":452})", -37.0, 452.0},
      {R"({"exclusiveMinimum":-5,"exclusiveMaximum":5})", -5.0, 5.0, true, true},
      {R"({"maximum":-100})", std::nullopt, -100.0},
      {R"({"exclusiveMaximum":0})", std::nullopt, 0.0, false, true},
      {R"({"minimum":0,"maximum":0})", 0.0, 0.0},
      {R"({"minimum":7,"maximum":7})", 7.0, 7.0},
      {R"({"minimum":1.5,"maximum":99.5})", 1.5, 99.5},
      {R"({"minimum":-999,"maximum":1000})", -999.0, 1000.0},
      {R"({"minimum":10,"maximum":99})", 10.0, 99.0},
      {R"({"minimum":100,"maximum":109})", 100.0, 109.0},
      {R"({"minimum":-1000,"maximum":-901})", -1000.0, -901.0},
      {R"({"minimum":3,"exclusiveMinimum":true,"maximum":250,"exclusiveMaximum":true})", 3.0, 250.0, true, true},
      {R"({"minimum":0,"exclusiveMinimum":2})", 2.0, std::nullopt, true},  // the tighter of the two
  };
  return r;
}

}  // namespace

TEST(SchemaKeywords, IntegerRangesAcceptExactlyTheirIntegers) {
  for (const Range& r : integer_ranges()) {
    SCOPED_TRACE(r.schema);
    const Grammar g = typed("integer", r.schema);
    for (int n = -1000; n <= 1000; ++n) ASSERT_EQ(accepts(g, std::to_string(n)), r.in(n)) << n;
    // JSON's shape: no "-0", no leading zeros, no fraction or exponent.
    for (const char* bad : {"-0", "007", "-01", "1.0", "1e2", "+1", ""}) EXPECT_FALSE(accepts(g, bad)) << bad;
  }
  // Large bounds: the edges, and random integers between them.
  struct Big {
    int64_t lo, hi;
  };
  std::mt19937_64 rng(5);
  for (const Big& b : {Big{123456789012, 9007199254740991}, Big{-9007199254740991, -4503599627370496}, Big{-1, 1000000000000000}}) {
    const Grammar g = typed("integer", json{{"minimum", b.lo}, {"maximum", b.hi}}.dump().c_str());
    for (int64_t v : {b.lo - 1, b.lo, b.lo + 1, b.hi - 1, b.hi, b.hi + 1}) EXPECT_EQ(accepts(g, std::to_string(v)), v >= b.lo && v <= b.hi) << v;
    for (int i = 0; i < 300; ++i) {
      const auto v = static_cast<int64_t>(rng() % 20'000'000'000'000'000ull) - 10'000'000'000'000'000;
      EXPECT_EQ(accepts(g, std::to_string(v)), v >= b.lo && v <= b.hi) << v;
    }
  }
  // One-sided: the other side stops at +-(2^53 - 1), so a double-based validator is exact.
  const Grammar up = typed("integer", R"({"minimum":5})");
  EXPECT_TRUE(accepts(up, "9007199254740991"));
  EXPECT_FALSE(accepts(up, "9007199254740992"));
  // Without bounds the integer grammar is unchanged.
  EXPECT_TRUE(accepts(compile(R"({"type":"integer"})"), "9999999999999999"));
}

TEST(SchemaKeywords, NumberRangesAcceptExactlyTheirNumbers) {
  const std::vector<Range> ranges = {
      {R"({"minimum":-1.5,"exclusiveMaximum":2.25})", -1.5, 2.25, false, true},
      {R"({"exclusiveMinimum":0})", 0.0, std::nullopt, true},
      {R"({"minimum":0})", 0.0, std::nullopt},
      {R"({"minimum":0.1,"maximum":0.3})", 0.1, 0.3},
      {R"({"maximum":-7.125})", std::nullopt, -7.125},
      {R"({"minimum":3,"maximum":3})", 3.0, 3.0},
      {R"({"exclusiveMinimum":0.5,"exclusiveMaximum":0.75})", 0.5, 0.75, true, true},
      {R"({"minimum":-12.5,"maximum":-12.25})", -12.5, -12.25},
      {R"({"exclusiveMinimum":-3,"maximum":0})", -3.0, 0.0, true},
      {R"({"minimum":1e-7})", 1e-7, std::nullopt},
      {R"({"minimum":-1e20,"maximum":1e20})", -1e20, 1e20},
      {R"({"minimum":0,"exclusiveMinimum":false,"maximum":10,"exclusiveMaximum":true})", 0.0, 10.0, false, true},
  };
  // Candidates: k/8 and k/100 over -20..20 in several spellings, and a few odd ones.
  std::vector<std::string> texts;
  for (int k = -2000; k <= 2000; ++k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", k / 100.0);
    texts.push_back(buf);
    if (k % 8 == 0) continue;
    std::snprintf(buf, sizeof buf, "%.3f", k / 8.0);
    texts.push_back(buf);
  }
  for (int k = -20; k <= 20; ++k) texts.push_back(std::to_string(k));
  for (const char* t : {"0.0000001", "0.00000009", "0.1000000000000001", "2.2499999999999996", "0.3000000000000001", "-0.5"})
    texts.push_back(t);
  std::mt19937 rng(3);
  for (const Range& r : ranges) {
    SCOPED_TRACE(r.schema);
    const Grammar g = typed("number", r.schema);
    for (const std::string& t : texts) {
      if (t == "-0.00") continue;  // "-0" spellings are never written, and are 0
      ASSERT_EQ(accepts(g, t), r.in(std::strtod(t.c_str(), nullptr))) << t;
    }
    for (const char* bad : {"-0", "-0.0", "01", "1.", ".5", "1e2", "+1"}) EXPECT_FALSE(accepts(g, bad)) << bad;
    // Every sentence the grammar can produce is in bounds for a double-based validator.
    for (int i = 0; i < 60; ++i) {
      const std::string s = random_sentence(g, rng, 12 + i % 30);
      ASSERT_FALSE(s.empty());
      EXPECT_TRUE(json::accept(s)) << s;
      EXPECT_TRUE(r.in(std::strtod(s.c_str(), nullptr))) << s;
    }
  }
  // Exclusive bounds stay strict after the text is read back as a double.
  const Grammar below = typed("number", R"({"exclusiveMaximum":1e15})");
  EXPECT_FALSE(accepts(below, "999999999999999.9999999999999999"));
  EXPECT_TRUE(accepts(below, "999999999999999.8"));
  EXPECT_EQ(decimal_of(1e-300).frac_digits.size(), 300u);
  EXPECT_EQ(decimal_of(123.456).int_digits, "123");
  EXPECT_EQ(decimal_of(123.456).frac_digits, "456");
}

TEST(SchemaKeywords, BoundsThatLeaveNothingAreRefusedByName) {
  struct Case {
    const char* schema;
    const char* keyword;
    bool unsupported;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"type":"integer","minimum":5,"maximum":3})", "minimum", false},
           {R"({"type":"integer","minimum":0.2,"maximum":0.8})", "minimum", false},
           {R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})", "exclusiveMinimum", false},
           {R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1})", "exclusiveMinimum", false},
           {R"({"type":"integer","minimum":1e17})", "minimum", true},
           {R"({"type":"number","minimum":1e17})", "minimum", true},
           {R"({"type":"number","exclusiveMinimum":0,"maximum":1e-20})", "exclusiveMinimum", true},
           {R"({"type":"integer","minimum":"3"})", "minimum", false},
           {R"({"type":"integer","exclusiveMaximum":true})", "exclusiveMaximum", false},
       }) {
    SCOPED_TRACE(c.schema);
    const SchemaError e = refusal(json::parse(c.schema));
    EXPECT_EQ(e.keyword, c.keyword) << e.message;
    EXPECT_EQ(e.unsupported, c.unsupported) << e.message;
    EXPECT_NE(e.message.find(c.keyword), std::string::npos) << e.message;
  }
  // Bounds without a type imply a number (anything else would escape them).
  const Grammar g = compile(R"({"minimum":2,"maximum":4})");
  EXPECT_TRUE(accepts(g, "3.5"));
  EXPECT_FALSE(accepts(g, "\"x\""));
  EXPECT_FALSE(accepts(g, "5"));
  // In a type list each type takes its own keywords.
  const Grammar both = compile(R"({"type":["integer","string","null"],"minimum":1,"maximum":3,"maxLength":1})");
  for (const char* good : {"1", "3", "\"a\"", "null"}) EXPECT_TRUE(accepts(both, good)) << good;
  for (const char* bad : {"0", "4", "\"ab\""}) EXPECT_FALSE(accepts(both, bad)) << bad;
}

TEST(SchemaKeywords, ItemAndLengthBoundsCountItemsAndCodePoints) {
  const Grammar arr = compile(R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":4})");
  for (int n = 0; n <= 6; ++n) {
    std::string t = "[";
    for (int i = 0; i < n; ++i) t += (i ? "," : "") + std::to_string(i);
    EXPECT_EQ(accepts(arr, t + "]"), n >= 2 && n <= 4) << t;
  }
  EXPECT_FALSE(accepts(arr, "[1,10]"));
  // A character is a code point whatever its bytes or escape; a surrogate pair is one.
  const Grammar two = compile(R"({"type":"string","minLength":2,"maxLength":2})");
  for (const char* good : {"\"ab\"", "\"\\u00e9x\"", "\"\\ud83d\\ude00x\"", "\"\xf0\x9f\x98\x80\xc3\xa9\"", "\"\\n\\\"\""})
    EXPECT_TRUE(accepts(two, good)) << good;
  for (const char* bad : {"\"a\"", "\"abc\"", "\"\\ud83d\\ude00\"", "\"\\ud83dx\"", "\"\\ude00x\""}) EXPECT_FALSE(accepts(two, bad)) << bad;
  std::mt19937 rng(9);
  for (int i = 0; i < 40; ++i) {
    const std::string s = random_sentence(two, rng);
    ASSERT_TRUE(json::accept(s)) << s;
    EXPECT_EQ(code_points(content(s)), 2u) << s;
  }
}

TEST(SchemaKeywords, EnumAndConstValuesMeetTheKeywordsBesideThem) {
  struct Case {
    const char* schema;
    std::vector<const char*> good, bad;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"enum":[1,2,3,"a"],"minimum":2})", {"2", "3", "\"a\""}, {"1"}},
           {R"({"type":"string","enum":["ab","abc",1],"maxLength":2})", {"\"ab\""}, {"\"abc\"", "1"}},
           {R"({"enum":["x1","y2"],"pattern":"^x"})", {"\"x1\""}, {"\"y2\""}},
           {R"({"enum":["2024-02-29","2023-02-29"],"format":"date"})", {"\"2024-02-29\""}, {"\"2023-02-29\""}},
           {R"({"enum":[[1],[1,2]],"minItems":2})", {"[1,2]"}, {"[1]"}},
           {R"({"type":"integer","enum":[1,1.0,1.5],"exclusiveMaximum":2})", {"1", "1.0"}, {"1.5"}},
           {R"({"const":5,"maximum":5})", {"5"}, {"4"}},
       }) {
    SCOPED_TRACE(c.schema);
    const Grammar g = compile(c.schema);
    for (const char* s : c.good) EXPECT_TRUE(accepts(g, s)) << s;
    for (const char* s : c.bad) EXPECT_FALSE(accepts(g, s)) << s;
  }
  for (const char* schema : {R"({"const":"2024-02-30","format":"date"})", R"({"enum":[1,2],"minimum":3})", R"({"const":"a","type":"integer"})"}) {
    const SchemaError e = refusal(json::parse(schema));
    EXPECT_TRUE(e.keyword == "const" || e.keyword == "enum") << schema << ": " << e.keyword;
    EXPECT_FALSE(e.unsupported) << schema;
  }
  EXPECT_EQ(refusal(json::parse(R"J({"enum":["a"],"pattern":"(?=a)"})J")).keyword, "pattern");
}

// ---- pattern ----

TEST(SchemaKeywords, PatternsMatchWhatEcmaScriptMatches) {
  // Every string over a small alphabet up to length 4, against std::regex (ECMAScript, search).
  const std::string alphabet = "ab1- ";
  std::vector<std::string> strings = {""};
  for (size_t start = 0, len = 0; len < 4; ++len) {
    const size_t end = strings.size();
    for (size_t i = start; i < end; ++i)
      for (char c : alphabet) strings.push_back(strings[i] + c);
    start = end;
  }
  for (const char* pattern : {"^a+$", "ab", "^(a|b)*$", "^[a-c]{2,3}$", "b$", "^\\d+(-\\d+)?$", "(ab|ba)+", "^a?b?1?$",
                              "[^a]", "^.{2}$", "^(?:a|1)*-$", "^[\\w-]{3}$", "^\\s*$", "^\\S\\s\\S$", "a{2}", "^(a{1,2}b){2}$",
                              "^[^-\\d]+$", "^$", "^a|b$", "^(ab?)+?1$", "\\W", "^[a\\-1]{2}$", "(?<x>1)(?:-)", "^\\x61\\u0062$",
                              "^[\\d\\s]+$", "1{2,}", "^(|a)b$"}) {
    SCOPED_TRACE(pattern);
    const Grammar g = compile(json{{"type", "string"}, {"pattern", pattern}}.dump());
    const std::regex re(pattern == std::string("(?<x>1)(?:-)") ? "(1)(?:-)" : pattern, std::regex::ECMAScript);
    for (const std::string& s : strings) ASSERT_EQ(accepts(g, json(s).dump()), std::regex_search(s, re)) << "'" << s << "'";
  }
}

TEST(SchemaKeywords, PatternsSeeCodePointsAndJsonEscapes) {
  struct Case {
    const char* pattern;
    std::vector<const char*> good, bad;  // JSON string texts
  };
  for (const Case& c : std::vector<Case>{
           {"^\xc3\xa9.$", {"\"\xc3\xa9\xe2\x82\xac\"", "\"\xc3\xa9\xf0\x9f\x98\x80\"", "\"\xc3\xa9x\""}, {"\"e\xe2\x82\xac\"", "\"\xc3\xa9\"", "\"\xc3\xa9\\n\""}},
           {"^[^a]$", {"\"\xf0\x9f\x98\x80\"", "\"\\u0001\"", "\"\\u001F\"", "\"\\n\"", "\"\\\"\"", "\"\\\\\""}, {"\"a\"", "\"\"", "\"\\u0061\""}},
           {"^a\"b\\\\$", {"\"a\\\"b\\\\\""}, {"\"a\\\"b\"", "\"ab\\\\\""}},
           {"^[\\u4e00-\\u9fff]{2}$", {"\"\xe4\xb8\xad\xe6\x96\x87\""}, {"\"\xe4\xb8\xad\"", "\"ab\""}},
           {"^\\u{1F600}$", {"\"\xf0\x9f\x98\x80\""}, {"\"\xf0\x9f\x98\x81\""}},
           {"^\\t\\n$", {"\"\\t\\n\""}, {"\"\\t\""}},
       }) {
    SCOPED_TRACE(c.pattern);
    const Grammar g = compile(json{{"type", "string"}, {"pattern", c.pattern}}.dump());
    for (const char* s : c.good) EXPECT_TRUE(accepts(g, s)) << s;
    for (const char* s : c.bad) EXPECT_FALSE(accepts(g, s)) << s;
  }
  // Random sentences are valid JSON strings whose content matches (ASCII patterns: std::regex).
  std::mt19937 rng(4);
  for (const char* pattern : {"^[A-Z]{2}-\\d{3}$", "(cat|dog)s?", "^[^\"\\\\]{0,5}\"$", "^\\w+@\\w+\\.com$"}) {
    const Grammar g = compile(json{{"type", "string"}, {"pattern", pattern}, {"maxLength", 16}}.dump());
    const std::regex re(pattern, std::regex::ECMAScript);
    for (int i = 0; i < 40; ++i) {
      const std::string s = random_sentence(g, rng, 24);
      ASSERT_TRUE(json::accept(s)) << pattern << ": " << s;
      const std::string text = content(s);
      EXPECT_LE(code_points(text), 16u) << s;
      const bool ascii = std::all_of(text.begin(), text.end(), [](char ch) { return static_cast<uint8_t>(ch) < 0x80; });
      if (ascii) {
        EXPECT_TRUE(std::regex_search(text, re)) << pattern << ": " << s;
      }
    }
  }
  // Length bounds intersect the pattern.
  const Grammar ab = compile(R"({"type":"string","pattern":"^(ab)+$","minLength":3,"maxLength":7})");
  for (const char* good : {"\"abab\"", "\"ababab\""}) EXPECT_TRUE(accepts(ab, good)) << good;
  for (const char* bad : {"\"ab\"", "\"abababab\"", "\"aba\""}) EXPECT_FALSE(accepts(ab, bad)) << bad;
}

TEST(SchemaKeywords, PatternsThatCannotBeCompiledAreRefusedByName) {
  struct Case {
    const char* pattern;
    const char* says;
    bool unsupported;
  };
  for (const Case& c : std::vector<Case>{
           {"^(?=a)", "lookahead", true},
           {"a(?!b)", "lookahead", true},
           {"(?<=a)b", "lookbehind", true},
           {"(?<!a)b", "lookbehind", true},
           {"(a)\\1", "backreference", true},
           {"(?<n>a)\\k<n>", "backreference", true},
           {"\\bword\\b", "word boundary", true},
           {"\\p{L}+", "property", true},
           {"(ab", "not closed", false},
           {"ab)", "unbalanced", false},
           {"a{3,2}", "out of order", false},
           {"[z-a]", "out of order", false},
           {"*a", "nothing to repeat", false},
           {"a**", "nothing to repeat", false},
           {"a{1001}", "over 1000", false},
           {"[abc", "not closed", false},
           {"a^b", "matches no string", false},
       }) {
    SCOPED_TRACE(c.pattern);
    const SchemaError e = refusal(json{{"type", "object"}, {"properties", {{"s", {{"type", "string"}, {"pattern", c.pattern}}}}}});
    EXPECT_EQ(e.keyword, "pattern");
    EXPECT_EQ(e.pointer, "/properties/s");
    EXPECT_EQ(e.unsupported, c.unsupported) << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("'pattern'"), std::string::npos) << e.message;
  }
}

// ---- format ----

namespace {

bool digits_at(const std::string& s, size_t at, size_t n) {
  if (at + n > s.size()) return false;
  for (size_t i = at; i < at + n; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}
int num(const std::string& s, size_t at, size_t n) { return std::stoi(s.substr(at, n)); }

bool valid_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-' || !digits_at(s, 0, 4) || !digits_at(s, 5, 2) || !digits_at(s, 8, 2)) return false;
  using namespace std::chrono;
  return year_month_day{year{num(s, 0, 4)}, month{static_cast<unsigned>(num(s, 5, 2))}, day{static_cast<unsigned>(num(s, 8, 2))}}.ok();
}

bool valid_time(const std::string& s) {
  if (s.size() < 9 || s[2] != ':' || s[5] != ':' || !digits_at(s, 0, 2) || !digits_at(s, 3, 2) || !digits_at(s, 6, 2)) return false;
  if (num(s, 0, 2) > 23 || num(s, 3, 2) > 59 || num(s, 6, 2) > 59) return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == start) return false;
  }
  const std::string zone = s.substr(i);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':' && digits_at(zone, 1, 2) && digits_at(zone, 4, 2) &&
         num(zone, 1, 2) <= 23 && num(zone, 4, 2) <= 59;
}

bool valid_date_time(const std::string& s) {
  const size_t t = s.find_first_of("Tt");
  return t == 10 && valid_date(s.substr(0, 10)) && valid_time(s.substr(11));
}

// ISO 8601 durations: P, then nW alone, or date parts Y M D and/or T with H M S, each in
// that order, at most once, at least one, T never empty.
bool valid_duration(const std::string& s) {
  if (s.size() < 3 || s[0] != 'P') return false;
  size_t i = 1;
  auto number = [&] {
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > start;
  };
  if (s.back() == 'W') return number() && i == s.size() - 1;
  auto parts = [&](const std::string& units) {
    size_t next = 0, count = 0;
    while (i < s.size() && s[i] != 'T') {
      if (!number() || i >= s.size()) return size_t{0} - 1;
      const size_t u = units.find(s[i]);
      if (u == std::string::npos || u < next) return size_t{0} - 1;
      next = u + 1;
      ++count;
      ++i;
    }
    return count;
  };
  const size_t date = parts("YMD");
  if (date == size_t{0} - 1) return false;
  if (i == s.size()) return date > 0;
  ++i;  // 'T'
  const size_t time = parts("HMS");
  return time != size_t{0} - 1 && time > 0 && i == s.size();
}

bool valid_label(const std::string& l) {
  if (l.empty() || l.size() > 63 || l.front() == '-' || l.back() == '-') return false;
  return std::all_of(l.begin(), l.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

bool valid_hostname(const std::string& s, size_t min_labels = 1) {
  if (s.empty() || s.size() > 253) return false;
  size_t labels = 0, start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    if (!valid_label(s.substr(start, dot - start))) return false;
    ++labels;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return labels >= min_labels;
}

bool valid_email(const std::string& s) {
  const size_t at = s.rfind('@');
  if (at == std::string::npos || at == 0 || at > 64 || s.size() > 254) return false;
  const std::string local = s.substr(0, at);
  const std::string atext = "!#$%&'*+/=?^_`{|}~-";
  if (local.front() == '.' || local.back() == '.' || local.find("..") != std::string::npos) return false;
  for (char c : local)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && atext.find(c) == std::string::npos) return false;
  return valid_hostname(s.substr(at + 1), 2);
}

bool valid_ipv4(const std::string& s) {
  in_addr a{};
  return inet_pton(AF_INET, s.c_str(), &a) == 1;
}
bool valid_ipv6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

bool valid_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    const bool hyphen = i == 8 || i == 13 || i == 18 || i == 23;
    if (hyphen ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

struct Format {
  const char* name;
  std::function<bool(const std::string&)> valid;
  std::vector<const char*> good, bad;
};

const std::vector<Format>& formats() {
  static const std::vector<Format> f = {
      {"date", valid_date,
       {"2024-02-29", "2000-02-29", "0000-02-29", "1900-02-28", "2023-12-31", "2021-04-30", "1999-01-01"},
       {"2023-02-29", "1900-02-29", "2100-02-29", "2021-04-31", "2021-13-01", "2021-00-10", "2021-1-01", "21-01-01", "2021-01-32", "2021-01-00"}},
      {"time", valid_time,
       {"13:45:00Z", "23:59:59.123456+02:00", "00:00:00-11:30", "12:00:00.5Z"},
       {"24:00:00Z", "12:60:00Z", "12:00:60Z", "12:00:00", "12:00Z", "12:00:00+2:00", "12:00:00+24:00", "12:00:00.Z"}},
      {"date-time", valid_date_time,
       {"2024-05-01T13:45:00Z", "2024-02-29T00:00:00.5-05:00"},
       {"2024-05-01 13:45:00Z", "2023-02-29T00:00:00Z", "2024-05-01T13:45:00", "2024-05-01"}},
      {"duration", valid_duration,
       {"P1Y", "P1Y2M3D", "PT1H", "PT1H30M", "P1DT12H", "P3W", "PT0S", "P1M", "P10Y11M12DT13H14M15S"},
       {"P", "PT", "P1H", "1Y", "P1W2D", "PT1D", "P-1D", "P1.5D", "P1DT"}},
      {"email", valid_email,
       {"a@b.co", "first.last+tag@example.com", "x_y@sub.domain.org", "o'neil@x.io", "{x}|y~@z-1.a2"},
       {"a@b", "@b.co", "a..b@c.com", ".a@b.co", "a.@b.co", "a@-b.co", "a@b-.co", "a b@c.co", "a@b..co", "a@b.co.",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa@b.co"}},
      {"hostname", [](const std::string& s) { return valid_hostname(s); },
       {"example.com", "a", "a-b.c-d", "xn--bcher-kva.example", "localhost", "123.example", "A1.B2"},
       {"-a.com", "a-.com", "a..b", ".a", "a.", "a_b.com", "a b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}},
      {"ipv4", valid_ipv4,
       {"0.0.0.0", "255.255.255.255", "192.168.1.1", "10.0.0.255", "1.22.103.99"},
       {"256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.-4", "1..2.3", " 1.2.3.4"}},
      {"ipv6", valid_ipv6,
       {"::", "::1", "1::", "2001:db8::8a2e:370:7334", "2001:0db8:85a3:0000:0000:8a2e:0370:7334", "::ffff:192.168.1.1",
        "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "fe80::1:2", "1::2:3:4:5:6:7", "ABCD:EF01::"},
       {"1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", ":1", "1:", "::ffff:256.1.1.1", "1:2:3:4:5:6:7", "g::", "1:2:3:4:5:6:7:1.2.3.4", ":::"}},
      {"uuid", valid_uuid,
       {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000", "ABCDEF01-2345-6789-abcd-ef0123456789"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"}},
  };
  return f;
}

}  // namespace

TEST(SchemaKeywords, FormatsAcceptValidAndRefuseInvalidSamples) {
  std::mt19937 rng(21);
  for (const Format& f : formats()) {
    SCOPED_TRACE(f.name);
    const Grammar g = compile(json{{"type", "string"}, {"format", f.name}}.dump());
    for (const char* s : f.good) {
      EXPECT_TRUE(f.valid(s)) << "the oracle refuses a good sample: " << s;
      EXPECT_TRUE(accepts(g, json(s).dump())) << s;
    }
    for (const char* s : f.bad) {
      EXPECT_FALSE(f.valid(s)) << "the oracle takes a bad sample: " << s;
      EXPECT_FALSE(accepts(g, json(s).dump())) << s;
    }
    // Whatever the grammar lets a model write passes the independent check.
    for (int i = 0; i < 40; ++i) {
      const std::string s = random_sentence(g, rng, 30);
      ASSERT_TRUE(json::accept(s)) << s;
      EXPECT_TRUE(f.valid(content(s))) << s;
    }
  }
}

TEST(SchemaKeywords, FormatsCombineWithLengthsAndPatterns) {
  std::mt19937 rng(8);
  struct Case {
    const char* schema;
    std::function<bool(const std::string&)> valid;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"type":"string","format":"email","maxLength":12})", [](const std::string& s) { return valid_email(s) && code_points(s) <= 12; }},
           {R"({"type":"string","format":"ipv4","minLength":15})", [](const std::string& s) { return valid_ipv4(s) && s.size() == 15; }},
           {R"({"type":"string","format":"hostname","pattern":"^[a-f.]+$","maxLength":5})",
            [](const std::string& s) { return valid_hostname(s) && s.size() <= 5 && s.find_first_not_of("abcdef.") == std::string::npos; }},
           {R"({"type":"string","format":"duration","maxLength":6})", [](const std::string& s) { return valid_duration(s) && s.size() <= 6; }},
           {R"({"type":"string","format":"uuid","pattern":"^0"})", [](const std::string& s) { return valid_uuid(s) && s[0] == '0'; }},
       }) {
    SCOPED_TRACE(c.schema);
    const Grammar g = compile(c.schema);
    for (int i = 0; i < 40; ++i) {
      const std::string s = random_sentence(g, rng, 40);
      ASSERT_TRUE(json::accept(s)) << s;
      EXPECT_TRUE(c.valid(content(s))) << s;
    }
  }
  EXPECT_EQ(refusal(json::parse(R"({"type":"string","format":"date","minLength":11})")).keyword, "minLength");
  EXPECT_EQ(refusal(json::parse(R"({"type":"string","format":"ipv4","pattern":"^[a-z]+$"})")).keyword, "format");
  const SchemaError e = refusal(json::parse(R"({"type":"string","format":"uri"})"));
  EXPECT_EQ(e.keyword, "format");
  EXPECT_TRUE(e.unsupported);
  EXPECT_NE(e.message.find("hostname"), std::string::npos) << e.message;  // lists what is enforced
}

// ---- bounded cost ----

TEST(SchemaKeywords, SchemaBombsAreRefusedQuicklyByName) {
  struct Case {
    json schema;
    const char* keyword;
    const char* says;
    double seconds = 1.0;
  };
  std::string deep(200, '(');
  deep += "a" + std::string(200, ')');
  json many_patterns = {{"type", "object"}, {"properties", json::object()}};
  // 75 patterns of ~5,000 states each: ~15,000 elements apiece, over the limit in all.
  for (int k = 0; k < 75; ++k)
    many_patterns["properties"]["p" + std::to_string(k)] = {
        {"type", "string"}, {"pattern", "^[a-z]{1000}[0-9]{1000}[a-z]{1000}[0-9]{1000}[a-z]{" + std::to_string(900 + k) + "}$"}};
  for (const Case& c : std::vector<Case>{
           {{{"type", "string"}, {"pattern", "(a{1000}){1000}"}}, "pattern", "unrolls"},
           {{{"type", "string"}, {"pattern", "((a{30}){30}){30}"}}, "pattern", "unrolls"},
           {{{"type", "string"}, {"pattern", "a{100000}"}}, "pattern", "over 1000"},
           {{{"type", "string"}, {"pattern", "(a|b)*a(a|b){20}"}}, "pattern", "states"},
           {{{"type", "string"}, {"pattern", deep}}, "pattern", "nested"},
           {{{"type", "string"}, {"pattern", std::string(100000, '(')}}, "pattern", "nested"},
           {{{"type", "string"}, {"pattern", "^(a|b)*a(a|b){10}$"}, {"maxLength", 40}}, "maxLength", "states"},
           {many_patterns, "pattern", "too large", 4.0},  // refused once ~1M elements are built
       }) {
    SCOPED_TRACE(c.schema.dump().substr(0, 120));
    const auto t = std::chrono::steady_clock::now();
    const SchemaError e = refusal(c.schema);
    EXPECT_LT(seconds_since(t), c.seconds);
    EXPECT_EQ(e.keyword, c.keyword) << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  }
  // Enormous ranges are as cheap as small ones: the digits are bounded, not the values.
  for (const char* s : {R"({"type":"integer","minimum":-1e300,"maximum":1e300})", R"({"type":"number","minimum":-1e300,"maximum":1e300})",
                        R"({"type":"number","exclusiveMinimum":1e-300,"maximum":1e-290})",
                        R"({"type":"string","pattern":"^[a-z]*$","maxLength":4096})"}) {
    const auto t = std::chrono::steady_clock::now();
    SchemaError e;
    auto g = grammar_for_schema(json::parse(s), &e);
    EXPECT_LT(seconds_since(t), 1.0) << s;
    if (std::string(s).find("1e-290") != std::string::npos) {
      EXPECT_FALSE(g.ok()) << "16 fraction digits cannot reach 1e-290";
      continue;
    }
    ASSERT_TRUE(g.ok()) << s << ": " << e.message;
    EXPECT_LT(g->elements.size(), 200'000u) << s;
  }
}
