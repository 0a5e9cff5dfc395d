// Tokenizer reproducing @huggingface/jinja's lexer, including its preprocessing (lstrip_blocks,
// trim_blocks, the transformers `{% generation %}` tag, the dropped final newline) so whitespace comes
// out byte-identical. Token positions map back to the original template text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "host/chat_template/errors.hpp"

namespace memra::chat_template {

enum class Tok {
  text,
  numeric_literal,
  string_literal,
  identifier,
  equals,
  open_paren,
  close_paren,
  open_statement,
  close_statement,
  open_expression,
  close_expression,
  open_square_bracket,
  close_square_bracket,
  open_curly_bracket,
  close_curly_bracket,
  comma,
  dot,
  colon,
  pipe,
  additive_op,        // + - ~
  multiplicative_op,  // * / // %
  exponentiation_op,  // **
  comparison_op,      // < > <= >= == !=
  unary_op,           // - + (before an operand)
  comment,
};

const char* token_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  Pos pos;
};

// Throws TemplateError (with position) on a lexical error.
std::vector<Token> tokenize(std::string_view source);

}  // namespace memra::chat_template
