// The tree-walking interpreter. Split over interpreter.cpp (statements, expressions, calls),
// filters.cpp (filters and tests) and builtins.cpp (attribute access, methods, global functions).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "host/chat_template/ast.hpp"
#include "host/chat_template/chat_template.hpp"
#include "host/chat_template/value.hpp"

namespace memra::chat_template {

struct Env;
using EnvPtr = std::shared_ptr<Env>;

// A scope. Every scope implicitly holds the `namespace` builtin (as each Environment of the reference
// does), so a lookup of "namespace" stops at the innermost scope.
struct Env {
  EnvPtr parent;
  std::unordered_map<std::string, Value> vars;
};

enum class Method {
  // string
  upper,
  lower,
  strip,
  title,
  capitalize,
  rstrip,
  lstrip,
  startswith,
  endswith,
  split,
  replace,
  // object
  get,
  items,
  keys,
  values,
  dictsort,
};

enum class Global { namespace_, raise_exception, range, strftime_now, dict };

struct Function {
  enum class Type { method, global, macro, caller };
  Type type = Type::global;
  Method method = Method::upper;
  Global global = Global::namespace_;
  Value receiver;                   // method: the bound string/object
  const ast::Stmt* node = nullptr;  // macro / call block
  EnvPtr env;                       // call block: the scope it was written in
  std::string name;                 // for messages
};

// Raised by {% break %} / {% continue %}; unwinds to the innermost running for-loop (even through
// macro calls, as in the reference).
struct LoopSignal {
  bool is_break;
  Pos pos;
};

struct Args {
  std::vector<Value> positional;
  std::shared_ptr<Object> kwargs;  // never null
  const Value* kw(std::string_view key) const { return kwargs->find(key); }
};

class Interpreter {
 public:
  Interpreter(const RenderOptions& options, std::int64_t now_unix_seconds)
      : limits_(options.limits), now_(now_unix_seconds) {}

  std::string run(const ast::Program& program, const EnvPtr& global);

  static Value lookup(const Env& env, const std::string& name);
  static EnvPtr make_global_env();  // true/false/none, raise_exception, range, strftime_now

 private:
  // interpreter.cpp
  std::string exec_block(const std::vector<ast::StmtPtr>& stmts, const EnvPtr& env);
  Value exec(const ast::Stmt& s, const EnvPtr& env);
  Value exec_inner(const ast::Stmt& s, const EnvPtr& env);
  Value exec_for(const ast::Stmt& s, const EnvPtr& env);
  void exec_set(const ast::Stmt& s, const EnvPtr& env);
  Value exec_call_block(const ast::Stmt& s, const EnvPtr& env);
  Value eval(const ast::Expr& e, const EnvPtr& env);
  Value eval_inner(const ast::Expr& e, const EnvPtr& env);
  Value eval_binary(const ast::Expr& e, const EnvPtr& env);
  Value eval_unary(const ast::Expr& e, const EnvPtr& env);
  Value eval_member(const ast::Expr& e, const EnvPtr& env);
  Value eval_slice(const Value& object, const ast::Expr& slice, const EnvPtr& env);
  Value eval_call(const ast::Expr& e, const EnvPtr& env);
  Args eval_args(const std::vector<ast::ExprPtr>& args, std::size_t first, const EnvPtr& env);
  Value call(const Value& fn, std::vector<Value> args, const EnvPtr& call_site);
  Value call_macro(const Function& f, std::vector<Value> args, const EnvPtr& parent);
  void bind_macro_args(const std::string& display, const std::vector<ast::ExprPtr>& params, ast::SpecialArgs special,
                       std::vector<Value> args, const EnvPtr& scope);
  void check_size(std::size_t n) const;
  void count_iterations(std::uint64_t n);

  // filters.cpp
  Value apply_filter(const Value& operand, const ast::Expr& filter, const EnvPtr& env);
  Value apply_named_filter(const Value& operand, const std::string& name, bool call_form, const Args& args,
                           const EnvPtr& env);
  Value extension_filter(const Value& operand, const std::string& name, bool call_form, const Args& args,
                         const EnvPtr& env, bool& handled);
  bool run_test(const std::string& name, const Value& operand, const Value* arg);

  // builtins.cpp
  Value get_member(const Value& object, const Value& property);
  Value call_method(const Function& f, const std::vector<Value>& args);
  Value call_global(const Function& f, const std::vector<Value>& args);
  Value dictsort(const Object& object, const std::vector<Value>& args);

  Limits limits_;
  std::int64_t now_;
  std::size_t call_depth_ = 0;
  std::uint64_t iterations_ = 0;
};

// Helpers used across the interpreter's translation units.
Value make_method(Method m, const Value& receiver, const char* name);
Value make_global(Global g, const char* name);
const char* method_name(Method m);
std::optional<Method> object_method(std::string_view name);  // get/items/keys/values/dictsort
bool is_known_test(const std::string& name);
std::string strftime_js(std::int64_t unix_seconds, std::string_view format);

}  // namespace memra::chat_template
