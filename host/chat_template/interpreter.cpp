#include "host/chat_template/interpreter.hpp"

#include <cmath>

#include "host/chat_template/errors.hpp"
#include "host/chat_template/ops.hpp"
#include "host/chat_template/text.hpp"

namespace memra::chat_template {

using ast::Expr;
using ast::ExprKind;
using ast::Stmt;
using ast::StmtKind;

namespace {

EnvPtr child_env(const EnvPtr& parent) {
  auto e = std::make_shared<Env>();
  e->parent = parent;
  return e;
}

// x ** y as V8 computes it. V8 uses fdlibm's pow, which is not correctly rounded, while the C library's
// is; they agree whenever the exact result is a double, so memra computes those cases (and the special
// values) and refuses the rest rather than risk a last-digit difference from the reference.
double js_pow(double x, double y) {
  if (std::isnan(y)) return std::nan("");
  if (y == 0) return 1;
  if (std::isnan(x)) return std::nan("");
  if (std::isinf(y) && std::fabs(x) == 1) return std::nan("");
  if (y == 1) return x;
  if (y == -1) return 1 / x;
  if (y == 2) return x * x;
  if (y == 0.5 && !std::signbit(x)) return std::sqrt(x);
  if (x == 0 || std::isinf(x) || std::isinf(y)) return std::pow(x, y);
  const bool integral = std::floor(y) == y;
  if (x < 0 && !integral) return std::nan("");
  if (integral && std::fabs(y) <= 2048) {
    // Square-and-multiply, checking with fma that every product is exact.
    bool exact = true;
    auto mul = [&exact](double p, double q) {
      const double m = p * q;
      if (!std::isfinite(m) || std::fma(p, q, -m) != 0) exact = false;
      return m;
    };
    double result = 1, base = x;
    for (auto n = static_cast<unsigned long>(std::fabs(y)); n > 0 && exact; n >>= 1) {
      if (n & 1) result = mul(result, base);
      if (n > 1) base = mul(base, base);
    }
    if (exact && y < 0) {
      const double inv = 1 / result;
      if (std::fma(result, inv, -1) == 0) return inv;
      exact = false;
    }
    if (exact) return result;
  }
  fail("'" + text::js_number(x) + " ** " + text::js_number(y) +
           "' has no exact double result; memra only evaluates '**' when the result is exact, because the "
           "reference (V8) rounds such powers differently from the C library",
       ErrorCode::unsupported);
}

// A readable name for a callee in error messages: `message.content.startswith`, `foo`, ...
std::string describe(const Expr& e) {
  switch (e.kind) {
    case ExprKind::identifier:
      return e.name;
    case ExprKind::member: {
      const Expr* prop = e.kid(1);
      if (!e.flag && prop->kind == ExprKind::identifier) return describe(*e.kid(0)) + "." + prop->name;
      if (prop->kind == ExprKind::string_literal) return describe(*e.kid(0)) + "['" + prop->name + "']";
      return describe(*e.kid(0)) + "[...]";
    }
    case ExprKind::call:
      return describe(*e.kid(0)) + "(...)";
    default:
      return "(expression)";
  }
}

}  // namespace

Value Interpreter::lookup(const Env& env, const std::string& name) {
  for (const Env* e = &env; e; e = e->parent.get()) {
    const auto it = e->vars.find(name);
    if (it != e->vars.end()) return it->second.is(Kind::absent) ? Value::undefined() : it->second;
    if (name == "namespace") {
      static const Value ns = make_global(Global::namespace_, "namespace");
      return ns;
    }
  }
  if (name == "dict") {  // Jinja2's dict(); not in @huggingface/jinja (where it would be undefined)
    static const Value dict = make_global(Global::dict, "dict");
    return dict;
  }
  return Value::undefined();
}

EnvPtr Interpreter::make_global_env() {
  auto env = std::make_shared<Env>();
  env->vars["false"] = Value::boolean(false);
  env->vars["true"] = Value::boolean(true);
  env->vars["none"] = Value::null();
  env->vars["raise_exception"] = make_global(Global::raise_exception, "raise_exception");
  env->vars["range"] = make_global(Global::range, "range");
  env->vars["strftime_now"] = make_global(Global::strftime_now, "strftime_now");
  env->vars["True"] = Value::boolean(true);
  env->vars["False"] = Value::boolean(false);
  env->vars["None"] = Value::null();
  return env;
}

std::string Interpreter::run(const ast::Program& program, const EnvPtr& global) {
  try {
    return exec_block(program.body, global);
  } catch (const LoopSignal& s) {
    fail_at(s.pos, std::string("{% ") + (s.is_break ? "break" : "continue") + " %} outside a for loop");
  }
}

void Interpreter::check_size(std::size_t n) const {
  if (n > limits_.max_output_bytes) {
    fail("output exceeds the limit of " + std::to_string(limits_.max_output_bytes) +
         " bytes (runaway template?); raise Limits::max_output_bytes if this is intended");
  }
}

void Interpreter::count_iterations(std::uint64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations) {
    fail("more than " + std::to_string(limits_.max_loop_iterations) +
         " loop iterations (runaway template?); raise Limits::max_loop_iterations if this is intended");
  }
}

std::string Interpreter::exec_block(const std::vector<ast::StmtPtr>& stmts, const EnvPtr& env) {
  std::string out;
  for (const auto& sp : stmts) {
    const Stmt& s = *sp;
    if (s.kind == StmtKind::text) {
      out += s.text;
    } else {
      const Value v = exec(s, env);
      if (v.is(Kind::null) || v.is_undefined()) continue;
      if (v.is_string()) {
        out += v.str();
      } else {
        try {
          out += to_output_string(v);
        } catch (TemplateError& err) {
          if (!err.pos.known()) err.pos = s.pos;
          throw;
        }
      }
    }
    check_size(out.size());
  }
  return out;
}

Value Interpreter::exec(const Stmt& s, const EnvPtr& env) {
  try {
    return exec_inner(s, env);
  } catch (TemplateError& err) {
    if (!err.pos.known()) err.pos = s.pos;
    throw;
  }
}

Value Interpreter::exec_inner(const Stmt& s, const EnvPtr& env) {
  switch (s.kind) {
    case StmtKind::text:
      return Value::string(s.text);
    case StmtKind::output:
      return eval(*s.expr, env);
    case StmtKind::comment:
      return Value::null();
    case StmtKind::if_: {
      const Value test = eval(*s.expr, env);
      require_present(test, "test");
      return Value::string(exec_block(test.truthy() ? s.body : s.alt, env));
    }
    case StmtKind::for_:
      return exec_for(s, env);
    case StmtKind::break_:
      throw LoopSignal{true, s.pos};
    case StmtKind::continue_:
      throw LoopSignal{false, s.pos};
    case StmtKind::set:
      exec_set(s, env);
      return Value::null();
    case StmtKind::macro: {
      auto f = std::make_shared<Function>();
      f->type = Function::Type::macro;
      f->node = &s;
      f->name = s.text;
      env->vars[s.text] = Value::function(std::move(f));
      return Value::null();
    }
    case StmtKind::call_block:
      return exec_call_block(s, env);
    case StmtKind::filter_block: {
      const Value rendered = Value::string(exec_block(s.body, env));
      return apply_filter(rendered, *s.expr, env);
    }
  }
  fail("unknown statement");
}

namespace {

void assign_loop_target(const Expr& target, const Value& item, Env& scope) {
  if (target.kind == ExprKind::identifier) {
    scope.vars[target.name] = item;
    return;
  }
  for (std::size_t j = 0; j < target.kids.size(); ++j) {
    const Expr& k = *target.kids[j];
    if (k.kind != ExprKind::identifier) fail_at(k.pos, "cannot unpack into something that is not a name");
    scope.vars[k.name] = item.arr().items[j];
  }
}

}  // namespace

Value Interpreter::exec_for(const Stmt& s, const EnvPtr& env) {
  const EnvPtr scope = child_env(env);
  const Expr* test = nullptr;
  Value iterable;
  if (s.expr->kind == ExprKind::select) {
    iterable = eval(*s.expr->kid(0), scope);
    test = s.expr->kid(1);
  } else {
    iterable = eval(*s.expr, scope);
  }
  require_present(iterable, "loop over");
  if (!iterable.is_array() && !iterable.is_object()) {
    fail_at(s.expr->pos, "for loop expects a list or dict, got " + std::string(iterable.type_name()));
  }
  std::vector<Value> source;
  if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.obj().entries()) source.push_back(Value::string(k));
  } else {
    source = iterable.arr().items;
  }
  const Expr& target = *s.target;
  std::vector<Value> items;
  items.reserve(source.size());
  for (const Value& current : source) {
    if (target.kind == ExprKind::tuple_literal) {
      require_present(current, "unpack");
      if (!current.is_plain_array()) {
        fail_at(target.pos, "cannot unpack non-iterable type: " + std::string(current.type_name()));
      }
      if (current.arr().items.size() != target.kids.size()) {
        fail_at(target.pos, std::string("too ") + (target.kids.size() > current.arr().items.size() ? "few" : "many") +
                                " items to unpack");
      }
    }
    if (test) {
      count_iterations(1);
      const EnvPtr loop_scope = child_env(scope);
      assign_loop_target(target, current, *loop_scope);
      const Value keep = eval(*test, loop_scope);
      require_present(keep, "test");
      if (!keep.truthy()) continue;
    }
    items.push_back(current);
  }

  std::string result;
  bool no_iteration = true;
  const double n = static_cast<double>(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    count_iterations(1);
    auto loop = std::make_shared<Object>();
    const double di = static_cast<double>(i);
    loop->set("index", Value::integer(di + 1));
    loop->set("index0", Value::integer(di));
    loop->set("revindex", Value::integer(n - di));
    loop->set("revindex0", Value::integer(n - di - 1));
    loop->set("first", Value::boolean(i == 0));
    loop->set("last", Value::boolean(i + 1 == items.size()));
    loop->set("length", Value::integer(n));
    loop->set("previtem", i > 0 ? items[i - 1] : Value::undefined());
    loop->set("nextitem", i + 1 < items.size() ? items[i + 1] : Value::undefined());
    scope->vars["loop"] = Value::object(std::move(loop));
    assign_loop_target(target, items[i], *scope);
    try {
      result += exec_block(s.body, scope);
    } catch (const LoopSignal& sig) {
      // As in the reference, the interrupted iteration's output is dropped and it does not count as
      // "an iteration took place" for the else block.
      if (sig.is_break) break;
      continue;
    }
    no_iteration = false;
    check_size(result.size());
  }
  if (no_iteration) result += exec_block(s.alt, scope);
  return Value::string(std::move(result));
}

void Interpreter::exec_set(const Stmt& s, const EnvPtr& env) {
  const Value rhs = s.expr ? eval(*s.expr, env) : Value::string(exec_block(s.body, env));
  const Expr& target = *s.target;
  switch (target.kind) {
    case ExprKind::identifier:
      env->vars[target.name] = rhs;
      return;
    case ExprKind::tuple_literal: {
      require_present(rhs, "unpack");
      if (!rhs.is_array()) fail("cannot unpack non-iterable type in set: " + std::string(rhs.type_name()));
      const auto& items = rhs.arr().items;
      if (items.size() != target.kids.size()) {
        fail(std::string("too ") + (target.kids.size() > items.size() ? "few" : "many") + " items to unpack in set");
      }
      for (std::size_t i = 0; i < items.size(); ++i) {
        const Expr& k = *target.kids[i];
        if (k.kind != ExprKind::identifier) fail_at(k.pos, "cannot unpack into something that is not a name");
        env->vars[k.name] = items[i];
      }
      return;
    }
    case ExprKind::member: {
      const Value object = eval(*target.kid(0), env);
      if (!object.is(Kind::namespace_)) {
        fail_at(target.pos, "cannot assign an attribute of " + std::string(object.type_name()) +
                                "; only namespace() objects take {% set ns.attr = ... %}");
      }
      const Expr& prop = *target.kid(1);
      if (prop.kind != ExprKind::identifier) fail_at(prop.pos, "cannot assign to a member that is not a name");
      object.mutable_obj().set(prop.name, rhs);
      return;
    }
    default:
      fail_at(target.pos, "invalid left-hand side in {% set %}");
  }
}

Value Interpreter::exec_call_block(const Stmt& s, const EnvPtr& env) {
  auto caller = std::make_shared<Function>();
  caller->type = Function::Type::caller;
  caller->node = &s;
  caller->env = env;
  caller->name = "caller";
  const Expr& call_expr = *s.expr;
  Args a = eval_args(call_expr.kids, 1, env);
  std::vector<Value> args = std::move(a.positional);
  a.kwargs->is_kwargs = true;
  args.push_back(Value::object(a.kwargs));
  const Value fn = eval(*call_expr.kid(0), env);
  if (!fn.is(Kind::function)) {
    fail_at(call_expr.pos,
            "{% call %}: '" + describe(*call_expr.kid(0)) + "' is " + std::string(fn.type_name()) + ", not a macro");
  }
  const EnvPtr scope = child_env(env);
  scope->vars["caller"] = Value::function(std::move(caller));
  return call(fn, std::move(args), scope);
}

Value Interpreter::eval(const Expr& e, const EnvPtr& env) {
  try {
    return eval_inner(e, env);
  } catch (TemplateError& err) {
    if (!err.pos.known()) err.pos = e.pos;
    throw;
  }
}

Value Interpreter::eval_inner(const Expr& e, const EnvPtr& env) {
  switch (e.kind) {
    case ExprKind::integer_literal:
      return Value::integer(e.number);
    case ExprKind::float_literal:
      return Value::floating(e.number);
    case ExprKind::string_literal:
      return Value::string(e.name);
    case ExprKind::identifier:
      return lookup(*env, e.name);
    case ExprKind::array_literal:
    case ExprKind::tuple_literal: {
      std::vector<Value> items;
      items.reserve(e.kids.size());
      for (const auto& k : e.kids) items.push_back(eval(*k, env));
      return Value::array(std::move(items), e.kind == ExprKind::tuple_literal);
    }
    case ExprKind::object_literal: {
      auto obj = std::make_shared<Object>();
      for (std::size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        const Value key = eval(*e.kids[i], env);
        if (!key.is_string()) fail_at(e.kids[i]->pos, "dict keys must be strings, got " + std::string(key.type_name()));
        obj->set(key.str(), eval(*e.kids[i + 1], env));
      }
      return Value::object(std::move(obj));
    }
    case ExprKind::member:
      return eval_member(e, env);
    case ExprKind::call:
      return eval_call(e, env);
    case ExprKind::unary:
      return eval_unary(e, env);
    case ExprKind::binary:
      return eval_binary(e, env);
    case ExprKind::filter: {
      const Value operand = eval(*e.kid(0), env);
      return apply_filter(operand, *e.kid(1), env);
    }
    case ExprKind::test: {
      const Value operand = eval(*e.kid(0), env);
      const bool r = run_test(e.name, operand, nullptr);
      return Value::boolean(e.flag ? !r : r);
    }
    case ExprKind::select: {
      const Value test = eval(*e.kid(1), env);
      require_present(test, "test");
      return test.truthy() ? eval(*e.kid(0), env) : Value::undefined();
    }
    case ExprKind::ternary: {
      const Value cond = eval(*e.kid(0), env);
      require_present(cond, "test");
      return eval(*e.kid(cond.truthy() ? 1 : 2), env);
    }
    default:
      fail("this expression is only valid inside a call's argument list");
  }
}

Value Interpreter::eval_unary(const Expr& e, const EnvPtr& env) {
  const Value v = eval(*e.kid(0), env);
  if (e.name == "not") {
    require_present(v, "negate");
    return Value::boolean(!v.truthy());
  }
  if (!v.is_numeric_like()) {
    fail("unary " + e.name + " needs a number, got " + std::string(v.type_name()));
  }
  const double r = (e.name == "-" ? -1.0 : 1.0) * v.num();
  return v.is(Kind::floating) ? Value::floating(r) : Value::integer(r);
}

Value Interpreter::eval_binary(const Expr& e, const EnvPtr& env) {
  const std::string& op = e.name;
  const Value left = eval(*e.kid(0), env);
  if (op == "and" || op == "or") {
    require_present(left, "test");
    if (op == "and") return left.truthy() ? eval(*e.kid(1), env) : left;
    return left.truthy() ? left : eval(*e.kid(1), env);
  }
  const Value right = eval(*e.kid(1), env);
  if (op == "==") return Value::boolean(loose_equals(left, right));
  if (op == "!=") return Value::boolean(!loose_equals(left, right));
  if (left.is(Kind::absent) || right.is(Kind::absent)) fail("cannot use an undefined value with operator " + op);
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    fail("cannot perform operation " + op + " on undefined values");
  }
  if (left.is(Kind::null) || right.is(Kind::null)) fail("cannot perform operation " + op + " on null values");
  auto concat = [this](std::string a, const std::string& b) {
    a += b;
    check_size(a.size());
    return Value::string(std::move(a));
  };
  if (op == "~") return concat(js_string(left), js_string(right));
  if (op == "**" && left.is_numeric_like() && right.is_numeric_like()) {
    const double a = left.num(), b = right.num();
    if (a == 0 && b < 0) fail("0.0 cannot be raised to a negative power");
    const double r = js_pow(a, b);
    if (!std::isfinite(r)) fail("exponentiation result is not a finite real number");
    const bool is_float = left.is(Kind::floating) || right.is(Kind::floating) || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    const double a = left.num(), b = right.num();
    const bool is_float = left.is(Kind::floating) || right.is(Kind::floating);
    auto num = [is_float](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == ">=") return Value::boolean(a >= b);
    if (op == "<=") return Value::boolean(a <= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      std::vector<Value> items = left.arr().items;
      items.insert(items.end(), right.arr().items.begin(), right.arr().items.end());
      return Value::array(std::move(items));
    }
  } else if (right.is_array()) {
    if (op == "in" || op == "not in") {
      bool member = false;
      for (const Value& x : right.arr().items) {
        if (strict_equals(x, left)) {
          member = true;
          break;
        }
      }
      return Value::boolean(op == "in" ? member : !member);
    }
  }
  if ((left.is_string() || right.is_string()) && op == "+") return concat(js_string(left), js_string(right));
  if (left.is_string() && right.is_string() && (op == "in" || op == "not in")) {
    const bool found = right.str().find(left.str()) != std::string::npos;
    return Value::boolean(op == "in" ? found : !found);
  }
  if (left.is_string() && right.is_object() && (op == "in" || op == "not in")) {
    const bool found = right.obj().find(left.str()) != nullptr;
    return Value::boolean(op == "in" ? found : !found);
  }
  fail("unknown operator \"" + op + "\" between " + std::string(left.type_name()) + " and " +
       std::string(right.type_name()));
}

Value Interpreter::eval_member(const Expr& e, const EnvPtr& env) {
  const Value object = eval(*e.kid(0), env);
  const Expr& prop = *e.kid(1);
  Value property;
  if (e.flag) {
    if (prop.kind == ExprKind::slice) return eval_slice(object, prop, env);
    property = eval(prop, env);
  } else if (prop.kind == ExprKind::integer_literal) {
    property = Value::integer(prop.number);
  } else {
    property = Value::string(prop.name);
  }
  return get_member(object, property);
}

namespace {

// Python-style slicing as the reference implements it (utils.slice), over n items.
std::vector<std::size_t> slice_indices(std::size_t n_items, const Value& start_v, const Value& stop_v,
                                       const Value& step_v) {
  const double n = static_cast<double>(n_items);
  const double step = step_v.is_undefined() ? 1 : step_v.num();
  const int direction = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start = 0, stop = 0;
  if (direction >= 0) {
    start = start_v.is_undefined() ? 0 : start_v.num();
    start = start < 0 ? std::max(n + start, 0.0) : std::min(start, n);
    stop = stop_v.is_undefined() ? n : stop_v.num();
    stop = stop < 0 ? std::max(n + stop, 0.0) : std::min(stop, n);
  } else {
    start = start_v.is_undefined() ? n - 1 : start_v.num();
    start = start < 0 ? std::max(n + start, -1.0) : std::min(start, n - 1);
    stop = stop_v.is_undefined() ? -1 : stop_v.num();
    stop = stop < -1 ? std::max(n + stop, -1.0) : std::min(stop, n - 1);
  }
  std::vector<std::size_t> out;
  if (direction == 0) return out;
  for (double i = start; direction * i < direction * stop; i += step) out.push_back(static_cast<std::size_t>(i));
  return out;
}

}  // namespace

Value Interpreter::eval_slice(const Value& object, const Expr& slice, const EnvPtr& env) {
  require_present(object, "slice");
  if (!object.is_array() && !object.is_string()) fail("slice object must be an array or string");
  Value parts[3];
  const char* names[3] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    if (slice.kid(static_cast<std::size_t>(i))) parts[i] = eval(*slice.kid(static_cast<std::size_t>(i)), env);
    if (!parts[i].is(Kind::integer) && !parts[i].is_undefined()) {
      fail(std::string("slice ") + names[i] + " must be an integer or omitted, got " +
           std::string(parts[i].type_name()));
    }
  }
  if (object.is_array()) {
    const auto& items = object.arr().items;
    std::vector<Value> out;
    for (std::size_t i : slice_indices(items.size(), parts[0], parts[1], parts[2])) out.push_back(items[i]);
    return Value::array(std::move(out));
  }
  // Strings slice by code point (Array.from(str)).
  std::vector<std::pair<std::size_t, std::size_t>> cps;
  const std::string& s = object.str();
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    text::next_code_point(s, i);
    cps.emplace_back(b, i - b);
  }
  std::string out;
  for (std::size_t i : slice_indices(cps.size(), parts[0], parts[1], parts[2]))
    out.append(s, cps[i].first, cps[i].second);
  return Value::string(std::move(out));
}

Args Interpreter::eval_args(const std::vector<ast::ExprPtr>& args, std::size_t first, const EnvPtr& env) {
  Args a;
  a.kwargs = std::make_shared<Object>();
  for (std::size_t i = first; i < args.size(); ++i) {
    const Expr& arg = *args[i];
    if (arg.kind == ExprKind::spread) {
      const Value v = eval(*arg.kid(0), env);
      if (!v.is_array()) fail_at(arg.pos, "cannot unpack non-iterable type: " + std::string(v.type_name()));
      for (const Value& x : v.arr().items) a.positional.push_back(x);
    } else if (arg.kind != ExprKind::keyword_argument && arg.kind != ExprKind::keyword_spread) {
      a.positional.push_back(eval(arg, env));
    }
  }
  auto add = [&](const std::string& key, Value v, Pos p) {
    if (a.kwargs->find(key)) fail_at(p, "got multiple values for keyword argument '" + key + "'");
    a.kwargs->set(key, std::move(v));
  };
  for (std::size_t i = first; i < args.size(); ++i) {
    const Expr& arg = *args[i];
    if (arg.kind == ExprKind::keyword_argument) {
      add(arg.name, eval(*arg.kid(0), env), arg.pos);
    } else if (arg.kind == ExprKind::keyword_spread) {
      const Value v = eval(*arg.kid(0), env);
      if (!v.is_object()) fail_at(arg.pos, "argument after ** must be a mapping, not " + std::string(v.type_name()));
      for (const auto& [k, x] : v.obj().entries()) add(k, x, arg.pos);
    }
  }
  return a;
}

Value Interpreter::eval_call(const Expr& e, const EnvPtr& env) {
  Args a = eval_args(e.kids, 1, env);
  std::vector<Value> args = std::move(a.positional);
  if (!a.kwargs->empty()) {
    a.kwargs->is_kwargs = true;
    args.push_back(Value::object(a.kwargs));
  }
  const Value fn = eval(*e.kid(0), env);
  if (!fn.is(Kind::function)) {
    const ErrorCode code =
        fn.is_undefined() && e.kid(0)->kind == ExprKind::member ? ErrorCode::unsupported : ErrorCode::invalid_argument;
    fail("cannot call '" + describe(*e.kid(0)) + "': it is " + std::string(fn.type_name()) +
             (fn.is_undefined() ? " (unknown function or method, or a missing value)" : ", not a function"),
         code);
  }
  return call(fn, std::move(args), env);
}

Value Interpreter::call(const Value& fn, std::vector<Value> args, const EnvPtr& call_site) {
  const Function& f = fn.fn();
  switch (f.type) {
    case Function::Type::method:
      return call_method(f, args);
    case Function::Type::global:
      return call_global(f, args);
    case Function::Type::macro:
      return call_macro(f, std::move(args), call_site);
    case Function::Type::caller:
      return call_macro(f, std::move(args), f.env);
  }
  fail("unknown function");
}

Value Interpreter::call_macro(const Function& f, std::vector<Value> args, const EnvPtr& parent) {
  if (call_depth_ >= limits_.max_call_depth) {
    fail("macro calls nested deeper than " + std::to_string(limits_.max_call_depth) +
         " (runaway recursion?); raise Limits::max_call_depth if this is intended");
  }
  ++call_depth_;
  struct Release {
    std::size_t& d;
    ~Release() { --d; }
  } release{call_depth_};
  const EnvPtr scope = child_env(parent);
  const bool is_caller = f.type == Function::Type::caller;
  bind_macro_args(is_caller ? "None" : "'" + f.name + "'", f.node->params, f.node->special, std::move(args), scope);
  return Value::string(exec_block(f.node->body, scope));
}

void Interpreter::bind_macro_args(const std::string& display, const std::vector<ast::ExprPtr>& params,
                                  ast::SpecialArgs special, std::vector<Value> args, const EnvPtr& scope) {
  auto kwargs = std::make_shared<Object>();
  if (!args.empty() && args.back().is_object() && args.back().obj().is_kwargs) {
    for (const auto& [k, v] : args.back().obj().entries()) kwargs->set(k, v);
    args.pop_back();
  }
  std::vector<std::pair<std::string, const Expr*>> pending;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Expr& p = *params[i];
    const Expr* def = p.kind == ExprKind::keyword_argument ? p.kid(0) : nullptr;
    Value v = i < args.size() ? args[i] : Value::absent();
    if (v.is(Kind::absent)) {
      if (const Value* kw = kwargs->find(p.name)) {
        v = *kw;
        kwargs->erase(p.name);
      }
    }
    if (v.is(Kind::absent) && def) pending.emplace_back(p.name, def);
    scope->vars[p.name] = v.is(Kind::absent) ? Value::undefined() : v;
  }
  if (special.kwargs) {
    scope->vars["kwargs"] = Value::object(kwargs);
  } else if (!kwargs->empty()) {
    fail("macro " + display + " takes no keyword argument '" + kwargs->entries().front().first + "'");
  }
  if (special.varargs) {
    std::vector<Value> rest;
    for (std::size_t i = params.size(); i < args.size(); ++i) rest.push_back(args[i]);
    scope->vars["varargs"] = Value::array(std::move(rest));
  } else if (args.size() > params.size()) {
    fail("macro " + display + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const auto& [name, def] : pending) scope->vars[name] = eval(*def, scope);
}

}  // namespace memra::chat_template
