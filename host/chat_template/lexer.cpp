#include "host/chat_template/lexer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "host/chat_template/text.hpp"

namespace memra::chat_template {

const char* token_name(Tok t) {
  switch (t) {
    case Tok::text:
      return "text";
    case Tok::numeric_literal:
      return "number";
    case Tok::string_literal:
      return "string";
    case Tok::identifier:
      return "identifier";
    case Tok::equals:
      return "'='";
    case Tok::open_paren:
      return "'('";
    case Tok::close_paren:
      return "')'";
    case Tok::open_statement:
      return "'{%'";
    case Tok::close_statement:
      return "'%}'";
    case Tok::open_expression:
      return "'{{'";
    case Tok::close_expression:
      return "'}}'";
    case Tok::open_square_bracket:
      return "'['";
    case Tok::close_square_bracket:
      return "']'";
    case Tok::open_curly_bracket:
      return "'{'";
    case Tok::close_curly_bracket:
      return "'}'";
    case Tok::comma:
      return "','";
    case Tok::dot:
      return "'.'";
    case Tok::colon:
      return "':'";
    case Tok::pipe:
      return "'|'";
    case Tok::additive_op:
      return "operator";
    case Tok::multiplicative_op:
      return "operator";
    case Tok::exponentiation_op:
      return "'**'";
    case Tok::comparison_op:
      return "comparison";
    case Tok::unary_op:
      return "unary operator";
    case Tok::comment:
      return "comment";
  }
  return "token";
}

namespace {

// Preprocessed text plus, for every byte, its offset in the original template (for error positions).
struct Mapped {
  std::string s;
  std::vector<std::uint32_t> src;  // src.size() == s.size() + 1 (end sentinel)

  void push(const Mapped& from, std::size_t i) {
    s.push_back(from.s[i]);
    src.push_back(from.src[i]);
  }
  void push_range(const Mapped& from, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) push(from, i);
  }
  void finish(const Mapped& from) { src.push_back(from.src.back()); }
  void truncate(std::size_t n) {
    s.resize(n);
    src.resize(n);
  }
};

bool after_line_terminator(const std::string& s, std::size_t i) {
  if (i == 0) return true;
  const char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 are E2 80 A8 / E2 80 A9.
  return i >= 3 && static_cast<unsigned char>(s[i - 3]) == 0xE2 && static_cast<unsigned char>(s[i - 2]) == 0x80 &&
         (static_cast<unsigned char>(p) == 0xA8 || static_cast<unsigned char>(p) == 0xA9);
}

// template.replace(/^[ \t]*({[#%-])/gm, "$1")
Mapped lstrip_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.s;
  std::size_t i = 0;
  while (i < s.size()) {
    if (after_line_terminator(s, i)) {
      std::size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        out.push_range(in, j, j + 2);
        i = j + 2;
        continue;
      }
    }
    out.push(in, i++);
  }
  out.finish(in);
  return out;
}

// template.replace(/([#%-]})\n/g, "$1")
Mapped trim_blocks(const Mapped& in) {
  Mapped out;
  const std::string& s = in.s;
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.push_range(in, i, i + 2);
      i += 3;
      continue;
    }
    out.push(in, i++);
  }
  out.finish(in);
  return out;
}

// Matches `{%(-?)\s*(?:end)?generation\s*(-?)%}` at s[i]; returns the end offset or 0.
std::size_t match_generation_tag(const std::string& s, std::size_t i, bool& lstrip, bool& rstrip) {
  if (s.compare(i, 2, "{%") != 0) return 0;
  std::size_t j = i + 2;
  lstrip = j < s.size() && s[j] == '-';
  if (lstrip) ++j;
  j += text::space_run(s, j);
  if (s.compare(j, 3, "end") == 0) j += 3;
  if (s.compare(j, 10, "generation") != 0) return 0;
  j += 10;
  j += text::space_run(s, j);
  rstrip = j < s.size() && s[j] == '-';
  if (rstrip) ++j;
  if (s.compare(j, 2, "%}") != 0) return 0;
  return j + 2;
}

// template.replace(/(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs, ...): drops the transformers
// `{% generation %}` markers, honouring their `-` modifiers.
Mapped strip_generation_tags(const Mapped& in) {
  Mapped out;
  const std::string& s = in.s;
  std::size_t i = 0;
  std::size_t run_start = 0;  // where the whitespace run ending at out's end begins
  bool in_run = false;
  while (i < s.size()) {
    bool lstrip = false, rstrip = false;
    if (s[i] == '{') {
      if (const std::size_t end = match_generation_tag(s, i, lstrip, rstrip)) {
        if (lstrip && in_run) out.truncate(run_start);
        const std::size_t after = end + text::space_run(s, end);
        if (!rstrip) out.push_range(in, end, after);
        i = after;
        in_run = false;
        continue;
      }
    }
    std::size_t k = i;
    const char32_t cp = text::next_code_point(s, k);
    if (text::is_js_space(cp)) {
      if (!in_run) run_start = out.s.size();
      in_run = true;
    } else {
      in_run = false;
    }
    out.push_range(in, i, k);
    i = k;
  }
  out.finish(in);
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : original_(source) {
    Mapped m;
    m.s.assign(source);
    m.src.resize(source.size() + 1);
    for (std::size_t i = 0; i <= source.size(); ++i) m.src[i] = static_cast<std::uint32_t>(i);
    if (!m.s.empty() && m.s.back() == '\n') {
      m.s.pop_back();
      m.src.erase(m.src.end() - 2);
    }
    m = lstrip_blocks(m);
    m = trim_blocks(m);
    m = strip_generation_tags(m);
    src_ = std::move(m);
  }

  std::vector<Token> run();

 private:
  const std::string& s() const { return src_.s; }
  char at(std::size_t i) const { return i < s().size() ? s()[i] : '\0'; }
  bool starts(std::size_t i, std::string_view what) const { return s().compare(i, what.size(), what) == 0; }

  Pos pos_of(std::size_t i) const { return Pos{src_.src[std::min(i, s().size())]}; }

  [[noreturn]] void error(std::size_t at, std::string message) const { fail_at(pos_of(at), std::move(message)); }

  void push(Tok type, std::string value, std::size_t at) {
    tokens_.push_back(Token{type, std::move(value), pos_of(at)});
  }

  std::string consume_while_digits();
  std::string consume_word();
  std::string consume_string(char quote, std::size_t start);
  void skip_inner_whitespace();
  void strip_trailing_whitespace();
  void skip_leading_whitespace() { cur_ += text::space_run(s(), cur_); }

  std::string_view original_;
  Mapped src_;
  std::vector<Token> tokens_;
  std::size_t cur_ = 0;
};

// consumeWhile(isInteger): the reference fails when a token runs to the very end of the input.
std::string Lexer::consume_while_digits() {
  std::string out;
  while (cur_ < s().size() && at(cur_) >= '0' && at(cur_) <= '9') {
    out.push_back(s()[cur_++]);
    if (cur_ >= s().size()) error(cur_, "unexpected end of template inside a tag");
  }
  return out;
}

std::string Lexer::consume_word() {
  std::string out;
  while (cur_ < s().size() && text::is_word_byte(at(cur_))) {
    out.push_back(s()[cur_++]);
    if (cur_ >= s().size()) error(cur_, "unexpected end of template inside a tag");
  }
  return out;
}

void Lexer::skip_inner_whitespace() {
  const std::size_t n = text::space_run(s(), cur_);
  if (n > 0 && cur_ + n >= s().size()) error(cur_ + n, "unexpected end of template inside a tag");
  cur_ += n;
}

std::string Lexer::consume_string(char quote, std::size_t start) {
  std::string out;
  char16_t pending_high = 0;  // a \uD8xx escape waiting for its low half
  auto flush_pending = [&] {
    if (pending_high) text::append_utf8(out, pending_high);
    pending_high = 0;
  };
  while (true) {
    if (cur_ >= s().size()) error(start, "unterminated string literal");
    const char c = s()[cur_];
    if (c == quote) break;
    if (c == '\\') {
      ++cur_;
      if (cur_ >= s().size()) error(start, "unterminated string literal");
      const char e = s()[cur_++];
      if (e == 'x' || e == 'u') {
        const std::size_t len = e == 'x' ? 2 : 4;
        if (cur_ + len > s().size()) error(cur_ - 2, "invalid hexadecimal escape sequence");
        unsigned unit = 0;
        for (std::size_t k = 0; k < len; ++k) {
          const char h = s()[cur_ + k];
          int d = (h >= '0' && h <= '9')   ? h - '0'
                  : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                           : -1;
          if (d < 0)
            error(cur_ - 2, "invalid hexadecimal escape sequence \\" + std::string(1, e) + s().substr(cur_, len));
          unit = unit * 16 + static_cast<unsigned>(d);
        }
        cur_ += len;
        if (unit >= 0xDC00 && unit < 0xE000 && pending_high) {
          text::append_utf8(out, 0x10000 + ((pending_high - 0xD800u) << 10) + (unit - 0xDC00));
          pending_high = 0;
        } else {
          flush_pending();
          if (unit >= 0xD800 && unit < 0xDC00) {
            pending_high = static_cast<char16_t>(unit);
          } else {
            text::append_utf8(out, unit);
          }
        }
        continue;
      }
      flush_pending();
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        default:
          error(cur_ - 2, std::string("unexpected escaped character '") + e + "' in string literal");
      }
      continue;
    }
    flush_pending();
    out.push_back(c);
    ++cur_;
    if (cur_ >= s().size()) error(start, "unterminated string literal");
  }
  flush_pending();
  return out;
}

void Lexer::strip_trailing_whitespace() {
  if (!tokens_.empty() && tokens_.back().type == Tok::text) {
    std::string& v = tokens_.back().value;
    v.resize(text::trim_end(v).size());
    if (v.empty()) tokens_.pop_back();
  }
}

struct Fixed {
  std::string_view seq;
  Tok type;
};

// Order matters (longest/most specific first where prefixes overlap), as in the reference table.
constexpr Fixed kFixed[] = {
    {"{%", Tok::open_statement},
    {"%}", Tok::close_statement},
    {"{{", Tok::open_expression},
    {"}}", Tok::close_expression},
    {"(", Tok::open_paren},
    {")", Tok::close_paren},
    {"{", Tok::open_curly_bracket},
    {"}", Tok::close_curly_bracket},
    {"[", Tok::open_square_bracket},
    {"]", Tok::close_square_bracket},
    {",", Tok::comma},
    {".", Tok::dot},
    {":", Tok::colon},
    {"|", Tok::pipe},
    {"<=", Tok::comparison_op},
    {">=", Tok::comparison_op},
    {"==", Tok::comparison_op},
    {"!=", Tok::comparison_op},
    {"<", Tok::comparison_op},
    {">", Tok::comparison_op},
    {"+", Tok::additive_op},
    {"-", Tok::additive_op},
    {"~", Tok::additive_op},
    {"**", Tok::exponentiation_op},
    {"*", Tok::multiplicative_op},
    {"//", Tok::multiplicative_op},
    {"/", Tok::multiplicative_op},
    {"%", Tok::multiplicative_op},
    {"=", Tok::equals},
};

std::vector<Token> Lexer::run() {
  int curly_depth = 0;
  while (cur_ < s().size()) {
    const bool after_tag = tokens_.empty() || tokens_.back().type == Tok::close_statement ||
                           tokens_.back().type == Tok::close_expression || tokens_.back().type == Tok::comment;
    if (after_tag) {
      const std::size_t start = cur_;
      while (cur_ < s().size() &&
             !(at(cur_) == '{' && (at(cur_ + 1) == '%' || at(cur_ + 1) == '{' || at(cur_ + 1) == '#'))) {
        ++cur_;
      }
      if (cur_ > start) {
        push(Tok::text, s().substr(start, cur_ - start), start);
        continue;
      }
    }

    if (at(cur_) == '{' && at(cur_ + 1) == '#') {
      const std::size_t start = cur_;
      cur_ += 2;
      const bool strip_before = at(cur_) == '-';
      if (strip_before) ++cur_;
      std::string comment;
      while (at(cur_) != '#' || at(cur_ + 1) != '}') {
        if (cur_ + 2 >= s().size()) error(start, "comment {# is never closed with #}");
        comment.push_back(s()[cur_++]);
      }
      const bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_after) comment.pop_back();
      if (strip_before) strip_trailing_whitespace();
      push(Tok::comment, std::move(comment), start);
      cur_ += 2;
      if (strip_after) skip_leading_whitespace();
      continue;
    }

    if (starts(cur_, "{%-")) {
      strip_trailing_whitespace();
      push(Tok::open_statement, "{%", cur_);
      cur_ += 3;
      continue;
    }
    if (starts(cur_, "{{-")) {
      strip_trailing_whitespace();
      push(Tok::open_expression, "{{", cur_);
      curly_depth = 0;
      cur_ += 3;
      continue;
    }

    skip_inner_whitespace();

    if (starts(cur_, "-%}")) {
      push(Tok::close_statement, "%}", cur_);
      cur_ += 3;
      skip_leading_whitespace();
      continue;
    }
    if (starts(cur_, "-}}")) {
      push(Tok::close_expression, "}}", cur_);
      cur_ += 3;
      skip_leading_whitespace();
      continue;
    }

    const char c = at(cur_);
    if (c == '-' || c == '+') {
      if (tokens_.empty() || tokens_.back().type == Tok::text)
        error(cur_, std::string("unexpected character '") + c + "'");
      switch (tokens_.back().type) {
        case Tok::identifier:
        case Tok::numeric_literal:
        case Tok::string_literal:
        case Tok::close_paren:
        case Tok::close_square_bracket:
          break;  // a binary operator
        default: {
          const std::size_t start = cur_;
          ++cur_;
          std::string num = consume_while_digits();
          if (!num.empty() && at(cur_) == '.' && at(cur_ + 1) >= '0' && at(cur_ + 1) <= '9') {
            ++cur_;
            num += "." + consume_while_digits();
          }
          const bool is_num = !num.empty();
          push(is_num ? Tok::numeric_literal : Tok::unary_op, std::string(1, c) + num, start);
          continue;
        }
      }
    }

    bool matched = false;
    for (const Fixed& f : kFixed) {
      if (f.seq == "}}" && curly_depth > 0) continue;
      if (starts(cur_, f.seq)) {
        push(f.type, std::string(f.seq), cur_);
        if (f.type == Tok::open_expression) {
          curly_depth = 0;
        } else if (f.type == Tok::open_curly_bracket) {
          ++curly_depth;
        } else if (f.type == Tok::close_curly_bracket) {
          --curly_depth;
        }
        cur_ += f.seq.size();
        matched = true;
        break;
      }
    }
    if (matched) continue;

    if (c == '\'' || c == '"') {
      const std::size_t start = cur_;
      ++cur_;
      std::string str = consume_string(c, start);
      push(Tok::string_literal, std::move(str), start);
      ++cur_;
      continue;
    }
    if (c >= '0' && c <= '9') {
      const std::size_t start = cur_;
      std::string num = consume_while_digits();
      if ((tokens_.empty() || tokens_.back().type != Tok::dot) && at(cur_) == '.' && at(cur_ + 1) >= '0' &&
          at(cur_ + 1) <= '9') {
        ++cur_;
        num += "." + consume_while_digits();
      }
      push(Tok::numeric_literal, std::move(num), start);
      continue;
    }
    if (text::is_word_byte(c)) {
      const std::size_t start = cur_;
      push(Tok::identifier, consume_word(), start);
      continue;
    }
    std::size_t k = cur_;
    std::string shown;
    text::append_utf8(shown, text::next_code_point(s(), k));
    error(cur_, "unexpected character '" + shown + "' inside a tag");
  }
  return std::move(tokens_);
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

LineCol line_col(std::string_view source, std::uint32_t offset) {
  LineCol lc{1, 1};
  const std::size_t end = std::min<std::size_t>(offset, source.size());
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (source[i] == '\n') {
      ++lc.line;
      line_start = i + 1;
    }
  }
  for (std::size_t k = line_start; k < end;) {
    text::next_code_point(source, k);
    ++lc.col;
  }
  return lc;
}

}  // namespace memra::chat_template
