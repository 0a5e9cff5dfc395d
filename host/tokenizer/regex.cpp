#include "host/tokenizer/regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <vector>

namespace memra::tokenizer::detail {
namespace {

// Unicode White_Space, as a class body.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr std::string_view kWord = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

Error regex_error(std::string_view pattern, std::string why) {
  return make_error(ErrorCode::unsupported, "tokenizer regex " + std::string(pattern) + ": " + why +
                                                "; this pre-tokenizer pattern cannot be used yet");
}

}  // namespace

Result<std::string> translate_hf_regex(std::string_view p) {
  std::string out;
  out.reserve(p.size() * 2);
  std::vector<bool> groups;  // case-insensitivity of each open group
  bool ci = false;
  bool in_class = false;
  std::size_t class_start = 0;  // index in p just after '[' or '[^'
  for (std::size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\') {
      if (i + 1 >= p.size()) return regex_error(p, "trailing backslash");
      char e = p[i + 1];
      ++i;
      switch (e) {
        case 's':
          if (in_class) out += kWhiteSpace;
          else out += "[" + std::string(kWhiteSpace) + "]";
          continue;
        case 'S':
          if (in_class) return regex_error(p, "\\S inside a character class");
          out += "[^" + std::string(kWhiteSpace) + "]";
          continue;
        case 'w':
          if (in_class) out += kWord;
          else out += "[" + std::string(kWord) + "]";
          continue;
        case 'W':
          if (in_class) return regex_error(p, "\\W inside a character class");
          out += "[^" + std::string(kWord) + "]";
          continue;
        case 'u': {
          if (i + 4 >= p.size()) return regex_error(p, "short \\u escape");
          out += "\\x{" + std::string(p.substr(i + 1, 4)) + "}";
          i += 4;
          continue;
        }
        case 'p':
        case 'P': {
          out += '\\';
          out += e;
          if (i + 1 < p.size() && p[i + 1] == '{') {
            std::size_t close = p.find('}', i + 1);
            if (close == std::string_view::npos) return regex_error(p, "unterminated \\p{");
            out.append(p.substr(i + 1, close - i));
            i = close;
          }
          continue;
        }
        default:
          out += '\\';
          out += e;
          continue;
      }
    }
    if (in_class) {
      if (c == ']' && i != class_start) {
        in_class = false;
        out += c;
        continue;
      }
      if (ci && std::isalpha(static_cast<unsigned char>(c))) {
        // a-z style ranges get their other-case range too
        if (i + 2 < p.size() && p[i + 1] == '-' && std::isalpha(static_cast<unsigned char>(p[i + 2]))) {
          char a = c, b = p[i + 2];
          out += a;
          out += '-';
          out += b;
          auto flip = [](char x) {
            return static_cast<char>(std::islower(static_cast<unsigned char>(x)) ? std::toupper(x) : std::tolower(x));
          };
          out += flip(a);
          out += '-';
          out += flip(b);
          i += 2;
          continue;
        }
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        continue;
      }
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      class_start = i + 1;
      if (class_start < p.size() && p[class_start] == '^') {
        out += '^';
        ++i;
        ++class_start;
      }
      continue;
    }
    if (c == '(') {
      if (p.substr(i, 4) == "(?i:") {
        groups.push_back(ci);
        ci = true;
        out += "(?:";
        i += 3;
        continue;
      }
      if (p.substr(i, 4) == "(?i)") {
        ci = true;
        i += 3;
        continue;
      }
      if (p.substr(i, 3) == "(?-" || (p.substr(i, 2) == "(?" && i + 2 < p.size() && std::isalpha(static_cast<unsigned char>(p[i + 2])))) {
        return regex_error(p, "inline flags other than (?i");
      }
      groups.push_back(ci);
      out += c;
      continue;
    }
    if (c == ')') {
      if (!groups.empty()) {
        ci = groups.back();
        groups.pop_back();
      }
      out += c;
      continue;
    }
    if (ci && std::isalpha(static_cast<unsigned char>(c))) {
      out += '[';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += ']';
      continue;
    }
    out += c;
  }
  if (in_class) return regex_error(p, "unterminated character class");
  return out;
}

std::string quote_literal(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

namespace {

// Per-thread PCRE2 match state, shared by all patterns (only group 0 is read).
struct ThreadMatchState {
  pcre2_match_data_8* data = nullptr;
  pcre2_match_context_8* context = nullptr;
  pcre2_jit_stack_8* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create_8(1, nullptr);
    context = pcre2_match_context_create_8(nullptr);
    stack = pcre2_jit_stack_create_8(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign_8(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free_8(data);
    pcre2_match_context_free_8(context);
    pcre2_jit_stack_free_8(stack);
  }
};

ThreadMatchState& match_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code_8* code = pcre2_compile_8(reinterpret_cast<PCRE2_SPTR8>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &offset, nullptr);
  if (!code) {
    PCRE2_UCHAR8 buf[256];
    pcre2_get_error_message_8(err, buf, sizeof buf);
    return make_error(ErrorCode::invalid_argument, "tokenizer regex does not compile at offset " +
                                                       std::to_string(offset) + ": " +
                                                       reinterpret_cast<char*>(buf) + " (pattern " + pattern + ")");
  }
  std::shared_ptr<Regex> re(new Regex());
  re->code_ = code;
  re->jit_ = pcre2_jit_compile_8(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(re));
}

Result<std::shared_ptr<const Regex>> Regex::compile_hf(std::string_view hf_pattern) {
  auto translated = translate_hf_regex(hf_pattern);
  if (!translated) return translated.error();
  return compile(*translated);
}

Regex::~Regex() { pcre2_code_free_8(static_cast<pcre2_code_8*>(code_)); }

bool Regex::find(std::string_view subject, std::size_t start, std::size_t& match_begin,
                 std::size_t& match_end) const {
  ThreadMatchState& st = match_state();
  auto* code = static_cast<pcre2_code_8*>(code_);
  auto s = reinterpret_cast<PCRE2_SPTR8>(subject.data());
  int rc = jit_ ? pcre2_jit_match_8(code, s, subject.size(), start, 0, st.data, st.context) : PCRE2_ERROR_JIT_BADOPTION;
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)  // no JIT, or JIT stack exhausted: the interpreter decides
    rc = pcre2_match_8(code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, st.data, nullptr);
  if (rc < 0) return false;  // no match (or a match-limit error: the rest of the text stays one piece)
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer_8(st.data);
  match_begin = ov[0];
  match_end = ov[1];
  return true;
}

}  // namespace memra::tokenizer::detail
