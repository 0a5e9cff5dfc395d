// Filters and tests. The first part of apply_named_filter mirrors @huggingface/jinja's applyFilter
// branch by branch (including what it does not support for a given type: those fall through to
// extension_filter, which adds the Jinja2 behaviour for the filters chat templates commonly use, or fails).
#include <algorithm>
#include <cmath>
#include <functional>

#include "host/chat_template/errors.hpp"
#include "host/chat_template/interpreter.hpp"
#include "host/chat_template/ops.hpp"
#include "host/chat_template/text.hpp"

namespace memra::chat_template {

using ast::Expr;
using ast::ExprKind;

namespace {

const Value* positional(const Args& a, std::size_t i) { return i < a.positional.size() ? &a.positional[i] : nullptr; }

// args.at(i) ?? kwargs.get(name) ?? fallback
Value arg_or(const Args& a, std::size_t i, std::string_view name, Value fallback) {
  if (const Value* v = positional(a, i)) return *v;
  if (const Value* v = a.kw(name)) return *v;
  return fallback;
}

bool js_truthy_value(const Value& v) {
  // JS truthiness of `value.value` (used by indent's first/blank): containers are objects, always truthy.
  switch (v.kind()) {
    case Kind::array:
    case Kind::object:
    case Kind::namespace_:
    case Kind::function:
      return true;
    default:
      return v.truthy();
  }
}

// The reference's getAttributeValue: "a.b.0" through objects and arrays.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attribute_container()) {
      const Value* x = v.obj().find(part);
      v = x && !x->is(Kind::absent) ? *x : Value::undefined();
    } else if (v.is_array()) {
      const auto idx = text::parse_int(part);
      if (idx && *idx >= 0 && *idx < static_cast<double>(v.arr().items.size())) {
        v = v.arr().items[static_cast<std::size_t>(*idx)];
      } else {
        return Value::undefined();
      }
    } else {
      return Value::undefined();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t nl = s.find('\n', start);
    lines.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}

std::string indent_lines(const std::string& s, const std::string& pad, bool first, bool blank) {
  const auto lines = split_lines(s);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out.push_back('\n');
    if (!((!first && i == 0) || (!blank && lines[i].empty()))) out += pad;
    out += lines[i];
  }
  return out;
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    text::next_code_point(s, i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

Value sorted(std::vector<Value> items, const std::function<int(const Value&, const Value&)>& cmp) {
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) { return cmp(a, b) < 0; });
  return Value::array(std::move(items));
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// Python's round(x, ndigits): round half to even on the decimal value.
double python_round(double x, int ndigits) {
  if (!std::isfinite(x)) return x;
  const double scale = std::pow(10.0, ndigits);
  const double y = x * scale;
  double r = std::nearbyint(y);  // default rounding mode: half to even
  if (std::fabs(y - std::trunc(y)) != 0.5) r = std::round(y);
  return r / scale;
}

}  // namespace

Value Interpreter::apply_filter(const Value& operand, const Expr& filter, const EnvPtr& env) {
  if (filter.kind == ExprKind::identifier)
    return apply_named_filter(operand, filter.name, false, Args{{}, std::make_shared<Object>()}, env);
  const Expr& callee = *filter.kid(0);
  if (callee.kind != ExprKind::identifier) fail("a filter must be a name, optionally with arguments");
  const std::string& name = callee.name;
  if ((name == "selectattr" || name == "rejectattr") && operand.is_array()) {
    // The reference accepts only string literal arguments here: attribute, test name, test argument.
    for (const Value& item : operand.arr().items) {
      if (!item.is_attribute_container()) fail("`" + name + "` can only be applied to a list of objects");
    }
    for (std::size_t i = 1; i < filter.kids.size(); ++i) {
      if (filter.kids[i]->kind != ExprKind::string_literal) fail("the arguments of `" + name + "` must be strings");
    }
    if (filter.kids.size() < 2) fail("`" + name + "` needs an attribute name");
    const std::string attr = filter.kids[1]->name;
    const bool has_test = filter.kids.size() > 2;
    const std::string test = has_test ? filter.kids[2]->name : "";
    if (has_test && !is_known_test(test)) fail("unknown test '" + test + "'", ErrorCode::unsupported);
    const Value test_arg = filter.kids.size() > 3 ? Value::string(filter.kids[3]->name) : Value();
    const bool select = name == "selectattr";
    std::vector<Value> out;
    for (const Value& item : operand.arr().items) {
      const Value* a = item.obj().find(attr);
      bool r = false;
      if (a && !a->is(Kind::absent)) {
        r = has_test ? run_test(test, *a, filter.kids.size() > 3 ? &test_arg : nullptr) : a->truthy();
      }
      if (r == select) out.push_back(item);
    }
    return Value::array(std::move(out));
  }
  return apply_named_filter(operand, name, true, eval_args(filter.kids, 1, env), env);
}

Value Interpreter::apply_named_filter(const Value& operand, const std::string& name, bool call_form, const Args& args,
                                      const EnvPtr& env) {
  if (!call_form) {
    if (name == "safe") return operand;
    if (name == "tojson") return Value::string(to_json(operand, {}, true));
    switch (operand.kind()) {
      case Kind::array: {
        const auto& items = operand.arr().items;
        if (name == "list") return operand;
        if (name == "first") return items.empty() ? Value::absent() : items.front();
        if (name == "last") return items.empty() ? Value::absent() : items.back();
        if (name == "length") return Value::integer(static_cast<double>(items.size()));
        if (name == "reverse") return Value::array(std::vector<Value>(items.rbegin(), items.rend()));
        if (name == "sort") {
          return sorted(items, [](const Value& a, const Value& b) { return compare_values(a, b, false); });
        }
        if (name == "join") return Value::string(js_join(items, ""));
        if (name == "string") return Value::string(to_json(operand, {}, false));
        if (name == "unique") {
          std::vector<Value> out;
          for (const Value& x : items) {
            require_present(x, "compare");
            bool seen = false;
            for (const Value& y : out) seen = seen || same_value_zero(x, y);
            if (!seen) out.push_back(x);
          }
          return Value::array(std::move(out));
        }
        break;
      }
      case Kind::string: {
        const std::string& s = operand.str();
        if (name == "length") return Value::integer(static_cast<double>(text::utf16_length(s)));
        if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
          const Method m = name == "upper"   ? Method::upper
                           : name == "lower" ? Method::lower
                           : name == "title" ? Method::title
                                             : Method::capitalize;
          Function f;
          f.type = Function::Type::method;
          f.method = m;
          f.receiver = operand;
          return call_method(f, {});
        }
        if (name == "trim") return Value::string(std::string(text::trim(s)));
        if (name == "indent") return Value::string(indent_lines(s, "    ", false, false));
        if (name == "join" || name == "string") return operand;
        if (name == "int") return Value::integer(text::parse_int(s).value_or(0));
        if (name == "float") return Value::floating(text::parse_float(s).value_or(0));
        break;
      }
      case Kind::integer:
      case Kind::floating: {
        const bool is_int = operand.is(Kind::integer);
        if (name == "abs")
          return is_int ? Value::integer(std::fabs(operand.num())) : Value::floating(std::fabs(operand.num()));
        if (name == "int") return Value::integer(std::floor(operand.num()));
        if (name == "float") return Value::floating(operand.num());
        if (name == "string") return Value::string(to_output_string(operand));
        break;
      }
      case Kind::object: {
        const Object& o = operand.obj();
        if (name == "items") {
          std::vector<Value> pairs;
          for (const auto& [k, v] : o.entries()) pairs.push_back(Value::array({Value::string(k), v}));
          return Value::array(std::move(pairs));
        }
        if (name == "length") return Value::integer(static_cast<double>(o.size()));
        if (const auto m = object_method(name)) {
          Function f;
          f.type = Function::Type::method;
          f.method = *m;
          f.receiver = operand;
          return call_method(f, {});
        }
        break;
      }
      case Kind::boolean: {
        const bool b = operand.as_bool();
        if (name == "bool") return operand;
        if (name == "int") return Value::integer(b ? 1 : 0);
        if (name == "float") return Value::floating(b ? 1 : 0);
        if (name == "string") return Value::string(b ? "true" : "false");
        break;
      }
      default:
        break;
    }
  } else {
    if (name == "tojson") {
      JsonOptions o;
      const Value indent = arg_or(Args{{}, args.kwargs}, 0, "indent", Value::null());
      if (!indent.is(Kind::integer) && !indent.is(Kind::null)) fail("tojson: indent must be an integer");
      if (indent.is(Kind::integer)) o.indent = indent.num();
      const Value ascii = arg_or(Args{{}, args.kwargs}, 0, "ensure_ascii", Value::boolean(false));
      if (!ascii.is(Kind::boolean)) fail("tojson: ensure_ascii must be a boolean");
      o.ensure_ascii = ascii.as_bool();
      const Value sort_keys = arg_or(Args{{}, args.kwargs}, 0, "sort_keys", Value::boolean(false));
      if (!sort_keys.is(Kind::boolean)) fail("tojson: sort_keys must be a boolean");
      o.sort_keys = sort_keys.as_bool();
      const Value seps = arg_or(Args{{}, args.kwargs}, 0, "separators", Value::null());
      if (seps.is_array()) {
        const auto& s = seps.arr().items;
        if (s.size() != 2 || !s[0].is_string() || !s[1].is_string())
          fail("tojson: separators must be a tuple of two strings");
        o.separators = std::make_pair(s[0].str(), s[1].str());
      } else if (!seps.is(Kind::null)) {
        fail("tojson: separators must be a tuple of two strings");
      }
      return Value::string(to_json(operand, o, true));
    }
    if (name == "join") {
      std::vector<Value> items;
      if (operand.is_string()) {
        for (auto& cp : code_points(operand.str())) items.push_back(Value::string(std::move(cp)));
      } else if (operand.is_array()) {
        items = operand.arr().items;
      } else {
        fail("cannot apply filter \"join\" to type " + std::string(operand.type_name()));
      }
      const Value sep = arg_or(args, 0, "separator", Value::string(""));
      if (!sep.is_string()) fail("join: separator must be a string");
      std::string out = js_join(items, sep.str());
      check_size(out.size());
      return Value::string(std::move(out));
    }
    if (name == "int" || name == "float") {
      const bool is_int = name == "int";
      const Value def = arg_or(args, 0, "default", is_int ? Value::integer(0) : Value::floating(0));
      if (operand.is_string()) {
        const auto v = is_int ? text::parse_int(operand.str()) : text::parse_float(operand.str());
        if (!v) return def;
        return is_int ? Value::integer(*v) : Value::floating(*v);
      }
      if (operand.is_number()) return operand;
      if (operand.is(Kind::boolean)) {
        return is_int ? Value::integer(operand.as_bool() ? 1 : 0) : Value::floating(operand.as_bool() ? 1 : 0);
      }
      fail("cannot apply filter \"" + name + "\" to type " + std::string(operand.type_name()));
    }
    if (name == "default") {
      const Value def = positional(args, 0) ? *positional(args, 0) : Value::string("");
      const Value boolean = arg_or(args, 1, "boolean", Value::boolean(false));
      if (!boolean.is(Kind::boolean)) fail("the `default` filter's boolean flag must be a boolean");
      if (operand.is_undefined()) return def;
      if (boolean.as_bool()) {
        require_present(operand, "test");
        if (!operand.truthy()) return def;
      }
      return operand;
    }
    if (operand.is_array()) {
      const auto& items = operand.arr().items;
      if (name == "sort") {
        const Value reverse = arg_or(args, 0, "reverse", Value::boolean(false));
        if (!reverse.is(Kind::boolean)) fail("sort: reverse must be a boolean");
        const Value cs = arg_or(args, 1, "case_sensitive", Value::boolean(false));
        if (!cs.is(Kind::boolean)) fail("sort: case_sensitive must be a boolean");
        const Value attr = arg_or(args, 2, "attribute", Value::null());
        if (!attr.is_string() && !attr.is(Kind::integer) && !attr.is(Kind::null)) {
          fail("sort: attribute must be a string, integer, or null");
        }
        const std::string path = attr.is_string()         ? attr.str()
                                 : attr.is(Kind::integer) ? text::js_number(attr.num())
                                                          : "";
        const bool by_attr = !attr.is(Kind::null);
        const bool rev = reverse.as_bool(), case_sensitive = cs.as_bool();
        return sorted(items, [&](const Value& a, const Value& b) {
          const int r = by_attr ? compare_values(attribute_path(a, path), attribute_path(b, path), case_sensitive)
                                : compare_values(a, b, case_sensitive);
          return rev ? -r : r;
        });
      }
      if (name == "map" && args.kw("attribute")) {
        const Value attr = *args.kw("attribute");
        if (!attr.is_string()) fail("map: attribute must be a string");
        const Value* def = args.kw("default");
        std::vector<Value> out;
        for (const Value& item : items) {
          if (!item.is_attribute_container()) fail("map(attribute=...): the items must be objects");
          Value v = attribute_path(item, attr.str());
          out.push_back(v.is_undefined() && def ? *def : v);
        }
        return Value::array(std::move(out));
      }
    } else if (operand.is_string()) {
      if (name == "indent") {
        const Value width = arg_or(args, 0, "width", Value::integer(4));
        if (!width.is(Kind::integer)) fail("indent: width must be a number");
        if (width.num() < 0) fail("indent: width must not be negative");
        const bool first = js_truthy_value(arg_or(args, 1, "first", Value::boolean(false)));
        const bool blank = js_truthy_value(arg_or(args, 2, "blank", Value::boolean(false)));
        std::string out =
            indent_lines(operand.str(), std::string(static_cast<std::size_t>(width.num()), ' '), first, blank);
        check_size(out.size());
        return Value::string(std::move(out));
      }
      if (name == "replace") {
        std::vector<Value> call_args = args.positional;
        auto kw = std::make_shared<Object>(*args.kwargs);
        kw->is_kwargs = true;
        call_args.push_back(Value::object(kw));
        Function f;
        f.type = Function::Type::method;
        f.method = Method::replace;
        f.receiver = operand;
        return call_method(f, call_args);
      }
    } else if (operand.is_object()) {
      if (const auto m = object_method(name)) {
        Function f;
        f.type = Function::Type::method;
        f.method = *m;
        f.receiver = operand;
        std::vector<Value> call_args = args.positional;
        if (!args.kwargs->empty()) {
          auto kw = std::make_shared<Object>(*args.kwargs);
          kw->is_kwargs = true;
          call_args.push_back(Value::object(kw));
        }
        return call_method(f, call_args);
      }
    }
  }
  bool handled = false;
  Value v = extension_filter(operand, name, call_form, args, env, handled);
  if (handled) return v;
  require_present(operand, "filter");
  fail("unknown filter '" + name + "'" + (call_form ? "(...)" : "") + " for a value of type " +
           std::string(operand.type_name()),
       ErrorCode::unsupported);
}

// Jinja2 filters (or forms of them) that @huggingface/jinja lacks. Reached only where the reference
// would have failed, so they never change a rendering the reference produces.
Value Interpreter::extension_filter(const Value& operand, const std::string& name, bool call_form, const Args& args,
                                    const EnvPtr& env, bool& handled) {
  handled = true;
  if (operand.is(Kind::absent)) {
    handled = false;
    return {};
  }
  const bool no_args = args.positional.empty() && args.kwargs->empty();
  if (name == "default" || name == "d") {
    if (call_form) return apply_named_filter(operand, "default", true, args, env);
    return operand.is_undefined() ? Value::string("") : operand;
  }
  if (name == "count" && no_args) {
    if (operand.is_array()) return Value::integer(static_cast<double>(operand.arr().items.size()));
    if (operand.is_string()) return Value::integer(static_cast<double>(text::utf16_length(operand.str())));
    if (operand.is_object()) return Value::integer(static_cast<double>(operand.obj().size()));
  }
  if (operand.is_string()) {
    const std::string& s = operand.str();
    if ((name == "escape" || name == "e") && no_args) return Value::string(html_escape(s));
    if (name == "wordcount" && no_args) {
      // Python's \w+ runs: ASCII word characters plus any non-ASCII, non-space code point.
      double n = 0;
      bool in_word = false;
      for (std::size_t i = 0; i < s.size();) {
        const char32_t cp = text::next_code_point(s, i);
        const bool w = cp < 0x80 ? text::is_word_byte(static_cast<char>(cp)) : !text::is_js_space(cp);
        if (w && !in_word) ++n;
        in_word = w;
      }
      return Value::integer(n);
    }
    if (name == "reverse" && no_args) {
      auto cps = code_points(s);
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    if (name == "list" && no_args) {
      std::vector<Value> items;
      for (auto& cp : code_points(s)) items.push_back(Value::string(std::move(cp)));
      return Value::array(std::move(items));
    }
    if ((name == "first" || name == "last") && no_args) {
      auto cps = code_points(s);
      if (cps.empty()) return Value::undefined();
      return Value::string(name == "first" ? cps.front() : cps.back());
    }
    if (name == "trim" && call_form) {
      const Value chars = arg_or(args, 0, "chars", Value::null());
      if (chars.is(Kind::null)) return Value::string(std::string(text::trim(s)));
      if (!chars.is_string()) fail("trim: chars must be a string");
      const auto set = code_points(chars.str());
      auto cps = code_points(s);
      auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
      std::size_t b = 0, e = cps.size();
      while (b < e && in_set(cps[b])) ++b;
      while (e > b && in_set(cps[e - 1])) --e;
      std::string out;
      for (std::size_t i = b; i < e; ++i) out += cps[i];
      return Value::string(std::move(out));
    }
  }
  if (operand.is_number() && name == "round") {
    const Value precision = arg_or(args, 0, "precision", Value::integer(0));
    const Value method = arg_or(args, 1, "method", Value::string("common"));
    if (!precision.is(Kind::integer)) fail("round: precision must be an integer");
    if (!method.is_string()) fail("round: method must be 'common', 'ceil' or 'floor'");
    const double p = precision.num();
    const double scale = std::pow(10.0, p);
    if (method.str() == "common") {
      if (operand.is(Kind::integer)) return operand;
      return Value::floating(python_round(operand.num(), static_cast<int>(p)));
    }
    if (method.str() == "ceil") return Value::floating(std::ceil(operand.num() * scale) / scale);
    if (method.str() == "floor") return Value::floating(std::floor(operand.num() * scale) / scale);
    fail("round: method must be 'common', 'ceil' or 'floor'");
  }
  if (operand.is_object() && name == "list" && no_args) {
    std::vector<Value> keys;
    for (const auto& [k, v] : operand.obj().entries()) keys.push_back(Value::string(k));
    return Value::array(std::move(keys));
  }
  if (operand.is_array()) {
    const auto& items = operand.arr().items;
    if (name == "select" || name == "reject") {
      const bool select = name == "select";
      const Value* test = positional(args, 0);
      if (test && !test->is_string()) fail(name + ": the test name must be a string");
      const Value* test_arg = positional(args, 1);
      std::vector<Value> out;
      for (const Value& x : items) {
        require_present(x, "test");
        const bool r = test ? run_test(test->str(), x, test_arg) : x.truthy();
        if (r == select) out.push_back(x);
      }
      return Value::array(std::move(out));
    }
    if (name == "map" && !args.positional.empty()) {
      const Value& filter_name = args.positional[0];
      if (!filter_name.is_string()) fail("map: the filter name must be a string");
      Args rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.kwargs};
      const bool rest_empty = rest.positional.empty() && rest.kwargs->empty();
      std::vector<Value> out;
      for (const Value& x : items) out.push_back(apply_named_filter(x, filter_name.str(), !rest_empty, rest, env));
      return Value::array(std::move(out));
    }
    if (name == "batch" && call_form) {
      const Value size = arg_or(args, 0, "linecount", Value::undefined());
      if (!size.is(Kind::integer) || size.num() < 1) fail("batch: the batch size must be a positive integer");
      const Value* fill = positional(args, 1) ? positional(args, 1) : args.kw("fill_with");
      const auto n = static_cast<std::size_t>(size.num());
      std::vector<Value> out, cur;
      for (const Value& x : items) {
        cur.push_back(x);
        if (cur.size() == n) {
          out.push_back(Value::array(std::move(cur)));
          cur.clear();
        }
      }
      if (!cur.empty()) {
        if (fill && !fill->is(Kind::null)) {
          while (cur.size() < n) cur.push_back(*fill);
        }
        out.push_back(Value::array(std::move(cur)));
      }
      return Value::array(std::move(out));
    }
  }
  // Jinja2 accepts `x|upper()` for `x|upper`; the reference only knows the bare form for these.
  if (call_form && no_args) {
    static const char* kBareOnly[] = {"length", "upper", "lower",   "title",  "capitalize", "trim", "list",
                                      "first",  "last",  "reverse", "unique", "string",     "abs",  "items",
                                      "safe",   "count", "escape",  "e",      "wordcount"};
    for (const char* n : kBareOnly) {
      if (name == n) return apply_named_filter(operand, name, false, args, env);
    }
  }
  handled = false;
  return {};
}

bool is_known_test(const std::string& name) {
  static const char* kTests[] = {"boolean", "callable", "odd",       "even",     "false",   "true",     "none",
                                 "string",  "number",   "integer",   "iterable", "mapping", "sequence", "lower",
                                 "upper",   "defined",  "undefined", "equalto",  "eq"};
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

bool Interpreter::run_test(const std::string& name, const Value& operand, const Value* arg) {
  const bool absent = operand.is(Kind::absent);
  auto need_present = [&] {
    if (absent) fail("cannot test an undefined value with 'is " + name + "'");
  };
  if (name == "callable") return operand.is(Kind::function);
  if (name == "number") return operand.is_number();
  if (name == "integer") return operand.is(Kind::integer);
  if (name == "mapping") return operand.is_object();
  if (name == "sequence") return operand.is_array() || operand.is_object() || operand.is_string();
  need_present();
  if (name == "boolean") return operand.is(Kind::boolean);
  if (name == "odd" || name == "even") {
    if (!operand.is(Kind::integer)) fail("cannot use 'is " + name + "' on " + std::string(operand.type_name()));
    const bool odd = std::fmod(operand.num(), 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return operand.is(Kind::boolean) && !operand.as_bool();
  if (name == "true") return operand.is(Kind::boolean) && operand.as_bool();
  if (name == "none") return operand.is(Kind::null);
  if (name == "string") return operand.is_string();
  if (name == "iterable") return operand.is_plain_array() || operand.is_string();
  if (name == "lower" || name == "upper") {
    if (!operand.is_string()) return false;
    return operand.str() == (name == "lower" ? text::to_lower(operand.str()) : text::to_upper(operand.str()));
  }
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "equalto" || name == "eq") {
    if (!arg) fail("'" + name + "' needs a value to compare with");
    return strict_equals(operand, *arg);
  }
  fail("unknown test '" + name + "'", ErrorCode::unsupported);
}

}  // namespace memra::chat_template
