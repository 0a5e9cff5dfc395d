// Recursive-descent parser with @huggingface/jinja's grammar and operator precedence (tests bind tighter
// than `*`, filters tighter than unary minus, `**` is left-associative, `a if b` without else is a
// "select" that yields undefined). Throws TemplateError on a syntax error.
#pragma once

#include <vector>

#include "host/chat_template/ast.hpp"
#include "host/chat_template/lexer.hpp"

namespace memra::chat_template {

// `end` is the position reported for "unexpected end of template" errors that have no better anchor.
ast::Program parse(std::vector<Token> tokens, Pos end);

}  // namespace memra::chat_template
