// The syntax tree the parser builds and the interpreter walks; shapes follow @huggingface/jinja's AST.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "host/chat_template/errors.hpp"

namespace memra::chat_template::ast {

enum class ExprKind {
  integer_literal,   // number
  float_literal,     // number
  string_literal,    // name
  identifier,        // name
  array_literal,     // kids
  tuple_literal,     // kids
  object_literal,    // kids = key0, value0, key1, value1, ...
  member,            // kids = object, property; computed
  slice,             // kids = start, stop, step (each may be null)
  call,              // kids = callee, args...
  binary,            // name = operator; kids = left, right
  unary,             // name = operator ("not", "-", "+"); kids = argument
  filter,            // kids = operand, filter (identifier or call)
  test,              // name = test name; negate; kids = operand
  select,            // kids = lhs, test   (`a if cond` without else)
  ternary,           // kids = condition, true, false
  keyword_argument,  // name = key; kids = value
  spread,            // kids = argument      (*args)
  keyword_spread,    // kids = argument      (**kwargs)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  Pos pos;
  std::string name;
  double number = 0;
  bool flag = false;  // member: computed; test: negate
  std::vector<ExprPtr> kids;

  Expr(ExprKind k, Pos p) : kind(k), pos(p) {}
  const Expr* kid(std::size_t i) const { return i < kids.size() ? kids[i].get() : nullptr; }
};

enum class StmtKind {
  text,    // text
  output,  // expr                      {{ expr }}
  comment,
  if_,   // expr = test; body; alt    (elif is a nested if_ in alt)
  for_,  // target = loop variable(s); expr = iterable; body; alt = else block
  break_,
  continue_,
  set,           // target = assignee; expr = value (or null: block set with body)
  macro,         // text = name; params; body
  call_block,    // expr = call expression; params = caller parameters; has_params; body
  filter_block,  // expr = filter (identifier or call); body
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

// Which of the magic macro variables a macro (or call block) body reads.
struct SpecialArgs {
  bool kwargs = false;
  bool varargs = false;
};

struct Stmt {
  StmtKind kind;
  Pos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  std::vector<ExprPtr> params;
  std::vector<StmtPtr> body;
  std::vector<StmtPtr> alt;
  SpecialArgs special;

  Stmt(StmtKind k, Pos p) : kind(k), pos(p) {}
};

struct Program {
  std::vector<StmtPtr> body;
};

}  // namespace memra::chat_template::ast
