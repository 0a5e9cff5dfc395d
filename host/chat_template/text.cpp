#include "host/chat_template/text.hpp"

#include <unicode/ucol.h>
#include <unicode/ustring.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

namespace memra::chat_template::text {

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += len;
  return cp;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    if (cp >= 0x10000) {
      out.push_back(static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF)));
    } else {
      out.push_back(static_cast<char16_t>(cp));
    }
  }
  return out;
}

std::string from_utf16(std::u16string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char32_t cp = s[i];
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] < 0xE000) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    append_utf8(out, cp);
  }
  return out;
}

std::size_t utf16_length(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      ++i;
      ++n;
      continue;
    }
    n += next_code_point(s, i) >= 0x10000 ? 2 : 1;
  }
  return n;
}

bool is_js_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::size_t space_run(std::string_view s, std::size_t i) {
  std::size_t j = i;
  while (j < s.size()) {
    std::size_t k = j;
    if (!is_js_space(next_code_point(s, k))) break;
    j = k;
  }
  return j - i;
}

std::string_view trim_start(std::string_view s) { return s.substr(space_run(s, 0)); }

std::string_view trim_end(std::string_view s) {
  // Walk forward remembering where the last non-space code point ended (UTF-8 is not easily walked back).
  std::size_t end = 0;
  for (std::size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    if (!is_js_space(cp)) end = i;
  }
  return s.substr(0, end);
}

std::string_view trim(std::string_view s) { return trim_end(trim_start(s)); }

namespace {

// Shortest round-trip digits and decimal exponent: v = 0.d1d2...dk * 10^n.
void shortest_digits(double v, std::string& digits, int& n) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));
  const auto e_pos = sci.find('e');
  digits.clear();
  for (char c : sci.substr(0, e_pos)) {
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  n = exp10 + 1;
}

}  // namespace

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  std::string out;
  if (v < 0) {
    out.push_back('-');
    v = -v;
  }
  std::string d;
  int n = 0;
  shortest_digits(v, d, n);
  const int k = static_cast<int>(d.size());
  if (k <= n && n <= 21) {
    out += d;
    out.append(static_cast<std::size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += d.substr(0, static_cast<std::size_t>(n));
    out.push_back('.');
    out += d.substr(static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += d;
  } else {
    out.push_back(d[0]);
    if (k > 1) {
      out.push_back('.');
      out += d.substr(1);
    }
    out.push_back('e');
    out.push_back(n - 1 >= 0 ? '+' : '-');
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string js_float(double v) {
  if (v == 0 && std::signbit(v)) return "-0.0";
  if (std::isfinite(v) && std::fmod(v, 1.0) == 0) {
    if (std::fabs(v) >= 1e21) return js_number(v);
    char buf[400];
    auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 0);
    std::string out(buf, res.ptr);
    if (out == "-0") out = "0";
    return out + ".0";
  }
  return js_number(v);
}

std::string json_number(double v) { return std::isfinite(v) ? js_number(v) : "null"; }

namespace {
const char kHex[] = "0123456789abcdef";

void append_u_escape(std::string& out, unsigned unit) {
  out += "\\u";
  out.push_back(kHex[(unit >> 12) & 0xF]);
  out.push_back(kHex[(unit >> 8) & 0xF]);
  out.push_back(kHex[(unit >> 4) & 0xF]);
  out.push_back(kHex[unit & 0xF]);
}
}  // namespace

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    const std::size_t start = i;
    const char32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      default:
        break;
    }
    if (cp < 0x20 || (cp >= 0xD800 && cp < 0xE000)) {
      append_u_escape(out, static_cast<unsigned>(cp));  // control characters and lone surrogates
    } else if (ensure_ascii) {
      if (cp >= 0x10000) {
        append_u_escape(out, 0xD800 + ((cp - 0x10000) >> 10));
        append_u_escape(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        append_u_escape(out, static_cast<unsigned>(cp));
      }
    } else {
      out.append(s.substr(start, i - start));
    }
  }
  out.push_back('"');
}

namespace {

using CaseFn = int32_t (*)(UChar*, int32_t, const UChar*, int32_t, const char*, UErrorCode*);

std::string map_case(std::string_view s, CaseFn fn) {
  bool ascii = true;
  for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out(s);
    const bool upper = fn == &u_strToUpper;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  const std::u16string src = to_utf16(s);
  std::u16string dst(src.size() * 3 + 8, u'\0');
  UErrorCode err = U_ZERO_ERROR;
  const int32_t n = fn(reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
                       reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), "", &err);
  if (U_FAILURE(err)) return std::string(s);  // cannot happen with a 3x buffer; keep the text
  dst.resize(static_cast<std::size_t>(n));
  return from_utf16(dst);
}

}  // namespace

std::string to_upper(std::string_view s) { return map_case(s, &u_strToUpper); }
std::string to_lower(std::string_view s) { return map_case(s, &u_strToLower); }

int compare_utf16(std::string_view a, std::string_view b) {
  // UTF-8 byte order equals code point order; it differs from UTF-16 order only when a supplementary
  // code point meets one in U+E000..U+FFFF, so compare code points and fix that case up.
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const char32_t x = next_code_point(a, i);
    const char32_t y = next_code_point(b, j);
    if (x == y) continue;
    auto unit = [](char32_t c) -> char32_t { return c >= 0x10000 ? 0xD800 + ((c - 0x10000) >> 10) : c; };
    const char32_t ux = unit(x), uy = unit(y);
    if (ux != uy) return ux < uy ? -1 : 1;
    return x < y ? -1 : 1;  // same high surrogate: the low surrogates order like the code points
  }
  if (i < a.size()) return 1;
  if (j < b.size()) return -1;
  return 0;
}

int locale_compare(std::string_view a, std::string_view b) {
  // One root collator per thread: opening is not free and a collator must not be shared across threads.
  thread_local std::unique_ptr<UCollator, void (*)(UCollator*)> coll(nullptr, &ucol_close);
  UErrorCode err = U_ZERO_ERROR;
  if (!coll) coll.reset(ucol_open("", &err));
  if (U_FAILURE(err) || !coll) return compare_utf16(a, b);
  err = U_ZERO_ERROR;
  const UCollationResult r = ucol_strcollUTF8(coll.get(), a.data(), static_cast<int32_t>(a.size()), b.data(),
                                              static_cast<int32_t>(b.size()), &err);
  if (U_FAILURE(err)) return compare_utf16(a, b);
  return r == UCOL_LESS ? -1 : r == UCOL_GREATER ? 1 : 0;
}

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

double strtod_exact(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

// Longest StrDecimalLiteral prefix of s (after optional sign handled by caller): returns its length.
std::size_t decimal_literal_length(std::string_view s) {
  if (s.substr(0, 8) == "Infinity") return 8;
  std::size_t i = 0;
  std::size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  std::size_t end = i;
  if (i < s.size() && s[i] == '.') {
    std::size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j, ++frac_digits;
    if (int_digits > 0 || frac_digits > 0) end = j;
  }
  if (int_digits == 0 && frac_digits == 0) return 0;
  if (end < s.size() && (s[end] == 'e' || s[end] == 'E')) {
    std::size_t j = end + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    const std::size_t exp_start = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j > exp_start) end = j;
  }
  return end;
}

}  // namespace

std::optional<double> parse_int(std::string_view s) {
  s = trim_start(s);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  std::size_t n = 0;
  while (n < s.size() && is_digit(s[n])) ++n;
  if (n == 0) return std::nullopt;
  const double v = strtod_exact(std::string(s.substr(0, n)));
  return neg ? -v : v;
}

std::optional<double> parse_float(std::string_view s) {
  s = trim_start(s);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  const std::size_t n = decimal_literal_length(s);
  if (n == 0) return std::nullopt;
  const double v = s.substr(0, n) == "Infinity" ? HUGE_VAL : strtod_exact(std::string(s.substr(0, n)));
  return neg ? -v : v;
}

std::optional<double> to_number(std::string_view s) {
  s = trim(s);
  if (s.empty()) return 0.0;
  if (s.size() > 2 && s[0] == '0' &&
      (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' || s[1] == 'B')) {
    const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    double v = 0;
    for (char c : s.substr(2)) {
      int d = is_digit(c)              ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : 99;
      if (d >= base) return std::nullopt;
      v = v * base + d;
    }
    return v;
  }
  std::string_view body = s;
  bool neg = false;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  const std::size_t n = decimal_literal_length(body);
  if (n == 0 || n != body.size()) return std::nullopt;
  const double v = body == "Infinity" ? HUGE_VAL : strtod_exact(std::string(body));
  return neg ? -v : v;
}

}  // namespace memra::chat_template::text
