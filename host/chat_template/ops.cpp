#include "host/chat_template/ops.hpp"

#include <algorithm>
#include <cmath>

#include "host/chat_template/errors.hpp"
#include "host/chat_template/text.hpp"

namespace memra::chat_template {

void require_present(const Value& v, const char* what) {
  if (v.is(Kind::absent)) {
    fail(std::string("cannot ") + what + " an undefined value (the result of first/last on an empty list)");
  }
}

namespace {

constexpr int kMaxJsonDepth = 512;

void to_json_into(std::string& out, const Value& v, const JsonOptions& o, int depth, bool undefined_to_null) {
  if (depth > kMaxJsonDepth) fail("tojson: value nested deeper than 512 levels (a namespace containing itself?)");
  switch (v.kind()) {
    case Kind::null:
      out += "null";
      return;
    case Kind::undefined:
      out += undefined_to_null ? "null" : "undefined";
      return;
    case Kind::boolean:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::integer:
    case Kind::floating:
      out += text::json_number(v.num());
      return;
    case Kind::string:
      text::append_json_string(out, v.str(), o.ensure_ascii);
      return;
    case Kind::absent:
      fail("cannot convert an undefined value to JSON");
    case Kind::function:
      fail("cannot convert to JSON: FunctionValue");
    default:
      break;
  }
  if ((v.is_array() && v.arr().is_tuple) || (v.is_object() && v.obj().is_kwargs)) {
    fail("cannot convert to JSON: " + std::string(v.type_name()));
  }
  const bool indent = o.indent != 0;
  std::string item_sep, key_sep;
  if (o.separators) {
    item_sep = o.separators->first;
    key_sep = o.separators->second;
  } else {
    item_sep = indent ? "," : ", ";
    key_sep = ": ";
  }
  std::string unit;
  if (indent) unit.assign(static_cast<std::size_t>(o.indent), ' ');
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += unit;
  const std::string child = base + unit;

  if (v.is_array()) {
    const auto& items = v.arr().items;
    out.push_back('[');
    if (indent && !items.empty()) out += child;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out += item_sep;
        if (indent) out += child;
      }
      to_json_into(out, items[i], o, depth + 1, undefined_to_null);
    }
    if (indent && !items.empty()) out += base;
    out.push_back(']');
    return;
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : v.obj().entries()) entries.push_back(&e);
  if (o.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](auto* a, auto* b) { return text::locale_compare(a->first, b->first) < 0; });
  }
  out.push_back('{');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += item_sep;
    if (indent) out += child;
    text::append_json_string(out, entries[i]->first, o.ensure_ascii);
    out += key_sep;
    to_json_into(out, entries[i]->second, o, depth + 1, undefined_to_null);
  }
  if (indent && !entries.empty()) out += base;
  out.push_back('}');
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, bool undefined_to_null) {
  if (options.indent < 0) fail("tojson: indent must not be negative");
  std::string out;
  to_json_into(out, v, options, 0, undefined_to_null);
  return out;
}

std::string to_output_string(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
      return "undefined";
    case Kind::absent:
      fail("cannot print an undefined value (the result of first/last on an empty list)");
    case Kind::null:
      return "null";
    case Kind::boolean:
      return v.as_bool() ? "true" : "false";
    case Kind::integer:
      return text::js_number(v.num());
    case Kind::floating:
      return text::js_float(v.num());
    case Kind::string:
      return v.str();
    case Kind::function:
      fail("cannot print a function or macro object; call it instead");
    default:
      return to_json(v, {}, false);
  }
}

std::string js_join(const std::vector<Value>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    const Value& x = items[i];
    if (x.is(Kind::absent)) fail("cannot join an undefined value");
    if (x.is(Kind::null) || x.is(Kind::undefined)) continue;
    out += js_string(x);
  }
  return out;
}

std::string js_string(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
      return "undefined";
    case Kind::absent:
      fail("cannot convert an undefined value to a string");
    case Kind::null:
      return "null";
    case Kind::boolean:
      return v.as_bool() ? "true" : "false";
    case Kind::integer:
    case Kind::floating:
      return text::js_number(v.num());
    case Kind::string:
      return v.str();
    case Kind::array: {
      // Array.prototype.toString: join(",") of the items' own toString().
      std::string out;
      const auto& items = v.arr().items;
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out.push_back(',');
        if (!items[i].is(Kind::absent)) out += to_output_string(items[i]);
      }
      return out;
    }
    case Kind::object:
    case Kind::namespace_:
      return "[object Map]";
    case Kind::function:
      fail("cannot convert a function or macro object to a string");
  }
  return {};
}

namespace {

// JS primitive classes for the == algorithm.
enum class Js { undef, null, number, string, boolean, object };

Js js_class(const Value& v) {
  switch (v.kind()) {
    case Kind::undefined:
      return Js::undef;
    case Kind::null:
      return Js::null;
    case Kind::boolean:
      return Js::boolean;
    case Kind::integer:
    case Kind::floating:
      return Js::number;
    case Kind::string:
      return Js::string;
    default:
      return Js::object;
  }
}

struct Prim {
  Js cls = Js::undef;
  double num = 0;
  std::string str;
  const void* id = nullptr;
};

Prim prim_of(const Value& v) {
  Prim p;
  p.cls = js_class(v);
  switch (p.cls) {
    case Js::number:
    case Js::boolean:
      p.num = v.num();
      break;
    case Js::string:
      p.str = v.str();
      break;
    case Js::object:
      p.id = v.identity();
      break;
    default:
      break;
  }
  return p;
}

double to_num(const Prim& p) {
  if (p.cls == Js::string) return text::to_number(p.str).value_or(std::nan(""));
  return p.num;
}

bool loose(Prim x, Prim y, const Value* xv, const Value* yv) {
  if (x.cls == y.cls) {
    switch (x.cls) {
      case Js::number:
      case Js::boolean:
        return x.num == y.num;
      case Js::string:
        return x.str == y.str;
      case Js::object:
        return x.id == y.id;
      default:
        return true;  // undefined == undefined, null == null
    }
  }
  const auto nullish = [](Js c) { return c == Js::undef || c == Js::null; };
  if (nullish(x.cls) && nullish(y.cls)) return true;
  if (nullish(x.cls) || nullish(y.cls)) return false;
  if (x.cls == Js::boolean) {
    x.cls = Js::number;
    return loose(x, y, nullptr, yv);
  }
  if (y.cls == Js::boolean) {
    y.cls = Js::number;
    return loose(x, y, xv, nullptr);
  }
  if (x.cls == Js::number && y.cls == Js::string) return x.num == to_num(y);
  if (x.cls == Js::string && y.cls == Js::number) return to_num(x) == y.num;
  // An object meets a primitive: compare its string form (ToPrimitive).
  auto to_prim = [](const Value* v) {
    Prim p;
    p.cls = Js::string;
    if (v->is(Kind::function)) {
      p.str = "function";
    } else {
      p.str = js_string(*v);
    }
    return p;
  };
  if (x.cls == Js::object && xv) return loose(to_prim(xv), y, nullptr, yv);
  if (y.cls == Js::object && yv) return loose(x, to_prim(yv), xv, nullptr);
  return false;
}

}  // namespace

bool loose_equals(const Value& a, const Value& b) {
  require_present(a, "compare");
  require_present(b, "compare");
  return loose(prim_of(a), prim_of(b), &a, &b);
}

bool strict_equals(const Value& a, const Value& b) {
  require_present(a, "compare");
  require_present(b, "compare");
  const Js ca = js_class(a), cb = js_class(b);
  if (ca != cb) return false;
  switch (ca) {
    case Js::number:
    case Js::boolean:
      return a.num() == b.num();
    case Js::string:
      return a.str() == b.str();
    case Js::object:
      return a.identity() == b.identity();
    default:
      return true;
  }
}

bool same_value_zero(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number() && std::isnan(a.num()) && std::isnan(b.num())) return true;
  return strict_equals(a, b);
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  require_present(a, "compare");
  require_present(b, "compare");
  const auto cannot = [&](const std::string& what) { fail(what); };
  if (a.is(Kind::null) && b.is(Kind::null)) return 0;
  if (a.is(Kind::null) || b.is(Kind::null)) {
    cannot("cannot compare " + std::string(a.type_name()) + " with " + std::string(b.type_name()));
  }
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined()) {
    cannot("cannot compare " + std::string(a.type_name()) + " with " + std::string(b.type_name()));
  }
  if (a.is_numeric_like() && b.is_numeric_like()) return a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
  if (a.type_name() != b.type_name()) {
    cannot("cannot compare different types: " + std::string(a.type_name()) + " and " + std::string(b.type_name()));
  }
  if (!a.is_string()) cannot("cannot compare values of type " + std::string(a.type_name()));
  if (case_sensitive) return text::compare_utf16(a.str(), b.str());
  return text::compare_utf16(text::to_lower(a.str()), text::to_lower(b.str()));
}

}  // namespace memra::chat_template
