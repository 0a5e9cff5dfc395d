// Attribute access, the methods strings and dicts expose, and the global functions — with
// @huggingface/jinja's semantics (e.g. strip/lstrip/rstrip ignore their argument and trim all whitespace).
#include <algorithm>
#include <cmath>
#include <ctime>

#include "host/chat_template/errors.hpp"
#include "host/chat_template/interpreter.hpp"
#include "host/chat_template/ops.hpp"
#include "host/chat_template/text.hpp"

namespace memra::chat_template {

namespace {

struct MethodName {
  const char* name;
  Method method;
};

constexpr MethodName kStringMethods[] = {
    {"upper", Method::upper},   {"lower", Method::lower},           {"strip", Method::strip},
    {"title", Method::title},   {"capitalize", Method::capitalize}, {"rstrip", Method::rstrip},
    {"lstrip", Method::lstrip}, {"startswith", Method::startswith}, {"endswith", Method::endswith},
    {"split", Method::split},   {"replace", Method::replace},
};

constexpr MethodName kObjectMethods[] = {
    {"get", Method::get},       {"items", Method::items},       {"keys", Method::keys},
    {"values", Method::values}, {"dictsort", Method::dictsort},
};

std::optional<Method> string_method(std::string_view name) {
  for (const auto& m : kStringMethods) {
    if (name == m.name) return m.method;
  }
  return std::nullopt;
}

// /\b\w/g → upper case: ASCII word characters that follow a non-word character (the rest is kept).
std::string title_case(const std::string& s) {
  std::string out = s;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const bool boundary = i == 0 || !text::is_word_byte(s[i - 1]);
    if (boundary && out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 32);
  }
  return out;
}

// charAt(0).toUpperCase() + slice(1): only the first UTF-16 unit changes (a surrogate half cannot).
std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  std::size_t i = 0;
  const char32_t cp = text::next_code_point(s, i);
  if (cp >= 0x10000) return s;
  return text::to_upper(s.substr(0, i)) + s.substr(i);
}

std::string js_replace(const std::string& s, const std::string& from, const std::string& to,
                       std::optional<double> count) {
  if (count && *count == 0) return s;
  double remaining = (!count || *count < 0) ? INFINITY : *count;
  std::string out;
  if (from.empty()) {
    // /(?=)/gu matches at every code point boundary, both ends included.
    std::size_t i = 0;
    while (true) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (i >= s.size()) break;
      const std::size_t b = i;
      text::next_code_point(s, i);
      out.append(s, b, i - b);
    }
    return out;
  }
  std::size_t pos = 0;
  while (remaining > 0) {
    const std::size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    --remaining;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value split(const std::string& s, const std::vector<Value>& args) {
  const Value sep = !args.empty() && !args[0].is(Kind::absent) ? args[0] : Value::null();
  if (!sep.is_string() && !sep.is(Kind::null)) fail("split: sep must be a string or none");
  const Value maxsplit_v = args.size() > 1 && !args[1].is(Kind::absent) ? args[1] : Value::integer(-1);
  if (!maxsplit_v.is(Kind::integer)) fail("split: maxsplit must be an integer");
  const double maxsplit = maxsplit_v.num();
  std::vector<std::string> parts;
  if (sep.is(Kind::null)) {
    const std::string_view t = text::trim_start(s);
    std::size_t i = 0;
    while (i < t.size()) {
      i += text::space_run(t, i);
      if (i >= t.size()) break;
      const std::size_t start = i;
      while (i < t.size()) {
        std::size_t k = i;
        if (text::is_js_space(text::next_code_point(t, k))) break;
        i = k;
      }
      if (maxsplit != -1 && static_cast<double>(parts.size()) >= maxsplit) {
        parts.emplace_back(t.substr(start));
        break;
      }
      parts.emplace_back(t.substr(start, i - start));
    }
  } else {
    const std::string& d = sep.str();
    if (d.empty()) fail("split: empty separator");
    std::size_t pos = 0;
    while (true) {
      const std::size_t hit = s.find(d, pos);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(pos, hit - pos));
      pos = hit + d.size();
    }
    parts.push_back(s.substr(pos));
    if (maxsplit != -1 && static_cast<double>(parts.size()) > maxsplit) {
      // result.push(result.splice(maxsplit).join(sep))
      const double n = static_cast<double>(parts.size());
      const double k = maxsplit < 0 ? std::max(n + maxsplit, 0.0) : std::min(maxsplit, n);
      const auto ki = static_cast<std::size_t>(k);
      std::string tail;
      for (std::size_t i = ki; i < parts.size(); ++i) {
        if (i > ki) tail += d;
        tail += parts[i];
      }
      parts.resize(ki);
      parts.push_back(std::move(tail));
    }
  }
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

bool starts_or_ends(const std::string& s, const std::vector<Value>& args, bool starts) {
  const char* name = starts ? "startswith" : "endswith";
  if (args.empty()) fail(std::string(name) + "() requires at least one argument");
  auto test = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args[0];
  if (pattern.is_string()) return test(pattern.str());
  if (pattern.is_array()) {
    for (const Value& item : pattern.arr().items) {
      if (!item.is_string()) fail(std::string(name) + "() tuple elements must be strings");
      if (test(item.str())) return true;
    }
    return false;
  }
  fail(std::string(name) + "() argument must be a string or tuple of strings");
}

}  // namespace

std::optional<Method> object_method(std::string_view name) {
  for (const auto& m : kObjectMethods) {
    if (name == m.name) return m.method;
  }
  return std::nullopt;
}

const char* method_name(Method m) {
  for (const auto& x : kStringMethods) {
    if (x.method == m) return x.name;
  }
  for (const auto& x : kObjectMethods) {
    if (x.method == m) return x.name;
  }
  return "?";
}

Value make_method(Method m, const Value& receiver, const char* name) {
  auto f = std::make_shared<Function>();
  f->type = Function::Type::method;
  f->method = m;
  f->receiver = receiver;
  f->name = name;
  return Value::function(std::move(f));
}

Value make_global(Global g, const char* name) {
  auto f = std::make_shared<Function>();
  f->type = Function::Type::global;
  f->global = g;
  f->name = name;
  return Value::function(std::move(f));
}

Value Interpreter::get_member(const Value& object, const Value& property) {
  require_present(object, "read an attribute of");
  if (object.is_attribute_container()) {
    if (!property.is_string()) {
      fail("cannot access a property with a non-string key: got " + std::string(property.type_name()));
    }
    const Value* v = object.obj().find(property.str());
    if (v && !v->is(Kind::absent)) return *v;
    if (object.is_object()) {
      if (const auto m = object_method(property.str())) return make_method(*m, object, method_name(*m));
    }
    return Value::undefined();
  }
  if (object.is_array() || object.is_string()) {
    if (property.is(Kind::integer)) {
      double idx = std::isnan(property.num()) ? 0 : property.num();
      if (object.is_array()) {
        const auto& items = object.arr().items;
        const double n = static_cast<double>(items.size());
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return Value::undefined();
        const Value& item = items[static_cast<std::size_t>(idx)];
        return item.is(Kind::absent) ? Value::undefined() : item;
      }
      const std::u16string units = text::to_utf16(object.str());
      const double n = static_cast<double>(units.size());
      if (idx < 0) idx += n;
      if (idx < 0 || idx >= n) return Value::undefined();
      return Value::string(text::from_utf16(std::u16string_view(&units[static_cast<std::size_t>(idx)], 1)));
    }
    if (property.is_string()) {
      const std::string& key = property.str();
      if (key == "length") {
        return Value::integer(
            static_cast<double>(object.is_array() ? object.arr().items.size() : text::utf16_length(object.str())));
      }
      if (object.is_string()) {
        if (const auto m = string_method(key)) return make_method(*m, object, method_name(*m));
      }
      return Value::undefined();
    }
    fail("cannot access a property with a non-string/non-number key: got " + std::string(property.type_name()));
  }
  if (!property.is_string()) {
    fail("cannot access a property with a non-string key: got " + std::string(property.type_name()));
  }
  return Value::undefined();
}

Value Interpreter::call_method(const Function& f, const std::vector<Value>& args) {
  const Value& self = f.receiver;
  if (self.is_string()) {
    const std::string& s = self.str();
    switch (f.method) {
      case Method::upper:
        return Value::string(text::to_upper(s));
      case Method::lower:
        return Value::string(text::to_lower(s));
      case Method::strip:
        return Value::string(std::string(text::trim(s)));
      case Method::title:
        return Value::string(title_case(s));
      case Method::capitalize:
        return Value::string(capitalize(s));
      case Method::rstrip:
        return Value::string(std::string(text::trim_end(s)));
      case Method::lstrip:
        return Value::string(std::string(text::trim_start(s)));
      case Method::startswith:
        return Value::boolean(starts_or_ends(s, args, true));
      case Method::endswith:
        return Value::boolean(starts_or_ends(s, args, false));
      case Method::split:
        return split(s, args);
      case Method::replace: {
        if (args.size() < 2) fail("replace() requires at least two arguments");
        if (!args[0].is_string() || !args[1].is_string()) fail("replace() arguments must be strings");
        Value count = Value::null();
        if (args.size() > 2) {
          if (args[2].is_object() && args[2].obj().is_kwargs) {
            const Value* c = args[2].obj().find("count");
            count = c ? *c : Value::null();
          } else {
            count = args[2];
          }
        }
        if (!count.is(Kind::integer) && !count.is(Kind::null)) fail("replace() count must be an integer or none");
        std::string out = js_replace(s, args[0].str(), args[1].str(),
                                     count.is(Kind::null) ? std::nullopt : std::optional<double>(count.num()));
        check_size(out.size());
        return Value::string(std::move(out));
      }
      default:
        break;
    }
  } else if (self.is_object()) {
    const Object& o = self.obj();
    switch (f.method) {
      case Method::get: {
        if (args.empty() || !args[0].is_string()) {
          fail("get(): the key must be a string, got " + std::string(args.empty() ? "nothing" : args[0].type_name()));
        }
        const Value* v = o.find(args[0].str());
        if (v && !v->is(Kind::absent)) return *v;
        if (args.size() > 1 && !args[1].is(Kind::absent)) return args[1];
        return Value::null();
      }
      case Method::items: {
        std::vector<Value> pairs;
        for (const auto& [k, v] : o.entries()) pairs.push_back(Value::array({Value::string(k), v}));
        return Value::array(std::move(pairs));
      }
      case Method::keys: {
        std::vector<Value> keys;
        for (const auto& [k, v] : o.entries()) keys.push_back(Value::string(k));
        return Value::array(std::move(keys));
      }
      case Method::values: {
        std::vector<Value> values;
        for (const auto& [k, v] : o.entries()) values.push_back(v);
        return Value::array(std::move(values));
      }
      case Method::dictsort:
        return dictsort(o, args);
      default:
        break;
    }
  }
  fail(std::string("method ") + method_name(f.method) + "() is not available on " + std::string(self.type_name()));
}

Value Interpreter::dictsort(const Object& o, const std::vector<Value>& args) {
  std::vector<Value> pos;
  const Object* kw = nullptr;
  for (const Value& a : args) {
    if (a.is_object() && a.obj().is_kwargs) {
      kw = &a.obj();
    } else {
      pos.push_back(a);
    }
  }
  auto pick = [&](std::size_t i, const char* name, Value fallback) {
    if (i < pos.size()) return pos[i];
    if (kw) {
      if (const Value* v = kw->find(name)) return *v;
    }
    return fallback;
  };
  const Value cs = pick(0, "case_sensitive", Value::boolean(false));
  if (!cs.is(Kind::boolean)) fail("dictsort: case_sensitive must be a boolean");
  const Value by = pick(1, "by", Value::string("key"));
  if (!by.is_string()) fail("dictsort: by must be a string");
  if (by.str() != "key" && by.str() != "value") fail("dictsort: by must be either 'key' or 'value'");
  const Value reverse = pick(2, "reverse", Value::boolean(false));
  if (!reverse.is(Kind::boolean)) fail("dictsort: reverse must be a boolean");
  std::vector<Value> items;
  for (const auto& [k, v] : o.entries()) items.push_back(Value::array({Value::string(k), v}));
  const std::size_t idx = by.str() == "key" ? 0 : 1;
  const bool case_sensitive = cs.as_bool(), rev = reverse.as_bool();
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int r = compare_values(a.arr().items[idx], b.arr().items[idx], case_sensitive);
    return (rev ? -r : r) < 0;
  });
  return Value::array(std::move(items));
}

Value Interpreter::call_global(const Function& f, const std::vector<Value>& args) {
  switch (f.global) {
    case Global::namespace_: {
      std::vector<Value> pos = args;
      const Object* kw = nullptr;
      if (!pos.empty() && pos.back().is_object() && pos.back().obj().is_kwargs) {
        kw = &pos.back().obj();
        pos.pop_back();
      }
      if (pos.size() > 1) fail("namespace() expected at most 1 positional argument, got " + std::to_string(pos.size()));
      auto entries = std::make_shared<Object>();
      if (pos.size() == 1) {
        const Value& src = pos[0];
        require_present(src, "build a namespace from");
        if (src.is_object()) {
          for (const auto& [k, v] : src.obj().entries()) entries->set(k, v);
        } else if (src.is_array()) {
          for (const Value& pair : src.arr().items) {
            std::vector<Value> kv;
            if (pair.is_array()) {
              kv = pair.arr().items;
            } else if (pair.is_string()) {
              const std::string& s = pair.str();
              for (std::size_t i = 0; i < s.size();) {
                const std::size_t b = i;
                text::next_code_point(s, i);
                kv.push_back(Value::string(s.substr(b, i - b)));
              }
            }
            if (kv.size() != 2) fail("namespace() expected an object or an iterable of [key, value] pairs");
            if (!kv[0].is_string()) fail("namespace() keys must be strings");
            entries->set(kv[0].str(), kv[1]);
          }
        } else {
          fail("'" + std::string(src.type_name()) + "' object is not iterable");
        }
      }
      if (kw) {
        for (const auto& [k, v] : kw->entries()) entries->set(k, v);
      }
      return Value::namespace_(std::move(entries));
    }
    case Global::raise_exception: {
      std::string message;
      if (!args.empty() && !args[0].is_undefined()) message = js_string(args[0]);
      throw TemplateError{ErrorCode::invalid_argument, std::move(message), {}, true};
    }
    case Global::range: {
      if (args.empty() || args.size() > 3) fail("range() takes 1 to 3 arguments");
      for (const Value& a : args) {
        if (!a.is_number()) fail("range() arguments must be numbers, got " + std::string(a.type_name()));
      }
      double start = args[0].num(), stop = 0, step = 1;
      if (args.size() == 1) {
        stop = start;
        start = 0;
      } else {
        stop = args[1].num();
        if (args.size() == 3) step = args[2].num();
      }
      if (step == 0) fail("range() step must not be zero");
      const double count = std::ceil((stop - start) / step);
      if (count > 0)
        count_iterations(count > 1e18 ? static_cast<std::uint64_t>(1e18) : static_cast<std::uint64_t>(count));
      std::vector<Value> out;
      if (step > 0) {
        for (double i = start; i < stop; i += step)
          out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
      } else {
        for (double i = start; i > stop; i += step)
          out.push_back(std::floor(i) == i ? Value::integer(i) : Value::floating(i));
      }
      return Value::array(std::move(out));
    }
    case Global::strftime_now: {
      if (args.empty() || !args[0].is_string()) fail("strftime_now() expects a format string");
      return Value::string(strftime_js(now_, args[0].str()));
    }
    case Global::dict: {
      auto obj = std::make_shared<Object>();
      std::vector<Value> pos = args;
      const Object* kw = nullptr;
      if (!pos.empty() && pos.back().is_object() && pos.back().obj().is_kwargs) {
        kw = &pos.back().obj();
        pos.pop_back();
      }
      if (pos.size() > 1) fail("dict() expected at most 1 positional argument");
      if (pos.size() == 1) {
        if (pos[0].is_object()) {
          for (const auto& [k, v] : pos[0].obj().entries()) obj->set(k, v);
        } else if (pos[0].is_array()) {
          for (const Value& pair : pos[0].arr().items) {
            if (!pair.is_array() || pair.arr().items.size() != 2 || !pair.arr().items[0].is_string()) {
              fail("dict() expects [key, value] pairs with string keys");
            }
            obj->set(pair.arr().items[0].str(), pair.arr().items[1]);
          }
        } else {
          fail("dict() expects a mapping or a list of pairs");
        }
      }
      if (kw) {
        for (const auto& [k, v] : kw->entries()) obj->set(k, v);
      }
      return Value::object(std::move(obj));
    }
  }
  fail("unknown global function");
}

std::string strftime_js(std::int64_t unix_seconds, std::string_view format) {
  static const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  static const char* kLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                "July",    "August",   "September", "October", "November", "December"};
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  auto pad2 = [](int n) { return n < 10 ? "0" + std::to_string(n) : std::to_string(n); };
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size()) {
      const char c = format[i + 1];
      std::string rep;
      switch (c) {
        case 'Y':
          rep = std::to_string(tm.tm_year + 1900);
          break;
        case 'm':
          rep = pad2(tm.tm_mon + 1);
          break;
        case 'd':
          rep = pad2(tm.tm_mday);
          break;
        case 'b':
          rep = kShort[tm.tm_mon];
          break;
        case 'B':
          rep = kLong[tm.tm_mon];
          break;
        case 'H':
          rep = pad2(tm.tm_hour);
          break;
        case 'M':
          rep = pad2(tm.tm_min);
          break;
        case '%':
          rep = "%";
          break;
        default:
          break;
      }
      if (!rep.empty()) {
        out += rep;
        ++i;
        continue;
      }
    }
    out.push_back(format[i]);
  }
  return out;
}

}  // namespace memra::chat_template
