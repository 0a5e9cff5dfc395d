// The public API: compile/render, JSON context conversion, and turning internal errors into memra::Error.
// This is the only translation unit of the module that includes nlohmann/json.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "host/chat_template/ast.hpp"
#include "host/chat_template/chat_template.hpp"
#include "host/chat_template/errors.hpp"
#include "host/chat_template/interpreter.hpp"
#include "host/chat_template/lexer.hpp"
#include "host/chat_template/parser.hpp"
#include "host/json/bounded_parse.hpp"

namespace memra::chat_template {

namespace detail {
struct Compiled {
  std::string source;
  ast::Program program;
};
}  // namespace detail

namespace {

constexpr const char* kRaisedPrefix = "chat template raise_exception";
constexpr int kMaxContextDepth = 1000;

Error to_error(const TemplateError& e, std::string_view source, const char* kind) {
  std::string msg = e.raised ? kRaisedPrefix : std::string("chat template ") + kind;
  if (e.pos.known()) {
    const LineCol lc = line_col(source, e.pos.offset);
    msg += " at line " + std::to_string(lc.line) + ", column " + std::to_string(lc.col);
  }
  msg += ": " + e.message;
  return make_error(e.code, std::move(msg));
}

// Object.entries order of a JSON.parse'd object: array-index keys first, ascending; then insertion order.
bool array_index_key(const std::string& k, double& value) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  double v = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > 4294967294.0) return false;
  value = v;
  return true;
}

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxContextDepth) fail("the context is nested more than 1000 levels deep");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::null();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(static_cast<double>(j.get<std::int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<double>(j.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      return std::isfinite(d) && std::floor(d) == d ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<double, const std::string*>> index_keys;
      auto obj = std::make_shared<Object>();
      for (auto it = j.begin(); it != j.end(); ++it) {
        double v = 0;
        if (array_index_key(it.key(), v)) index_keys.emplace_back(v, &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [v, k] : index_keys) obj->set(*k, from_json(j.at(*k), depth + 1));
      for (auto it = j.begin(); it != j.end(); ++it) {
        double v = 0;
        if (!array_index_key(it.key(), v)) obj->set(it.key(), from_json(it.value(), depth + 1));
      }
      return Value::object(std::move(obj));
    }
    case nlohmann::ordered_json::value_t::binary:
      fail("binary JSON values are not supported in the context");
  }
  return Value::null();
}

}  // namespace

Result<Template> compile(std::string_view template_text) {
  auto compiled = std::make_shared<detail::Compiled>();
  compiled->source.assign(template_text);
  try {
    std::vector<Token> tokens = tokenize(compiled->source);
    compiled->program = parse(std::move(tokens), Pos{static_cast<std::uint32_t>(compiled->source.size())});
  } catch (const TemplateError& e) {
    return to_error(e, compiled->source, "syntax error");
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::internal, "chat template: out of memory while compiling");
  }
  Template t;
  t.impl_ = std::move(compiled);
  return t;
}

const std::string& Template::source() const { return impl_->source; }

Result<std::string> Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!impl_) return make_error(ErrorCode::invalid_argument, "chat template: render() on an empty Template");
  if (!context.is_object()) {
    return make_error(ErrorCode::invalid_argument,
                      "chat template: the render context must be a JSON object (messages, tools, ...)");
  }
  try {
    const EnvPtr global = Interpreter::make_global_env();
    for (auto it = context.begin(); it != context.end(); ++it) {
      if (global->vars.count(it.key()) || it.key() == "namespace") {
        return make_error(ErrorCode::invalid_argument,
                          "chat template: context key '" + it.key() +
                              "' clashes with the template global of the same name; rename it");
      }
      global->vars[it.key()] = from_json(it.value(), 0);
    }
    const std::int64_t now =
        options.now_unix_seconds ? *options.now_unix_seconds : static_cast<std::int64_t>(std::time(nullptr));
    Interpreter interpreter(options, now);
    return interpreter.run(impl_->program, global);
  } catch (const TemplateError& e) {
    return to_error(e, impl_->source, "error");
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::invalid_argument, "chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::internal, std::string("chat template: internal error: ") + e.what());
  }
}

Result<std::string> Template::render_json_text(std::string_view context_json, const RenderOptions& options) const {
  jsonio::ParseError why;
  auto context = jsonio::parse(context_json, jsonio::kRequestLimits, &why);
  if (!context) {
    return make_error(ErrorCode::invalid_argument,
                      "chat template: the render context is not valid JSON or passes a limit: " + why.message +
                          (why.path.empty() ? "" : " (at " + why.path + ")"));
  }
  return render(*context, options);
}

bool is_raised_exception(const Error& error) { return error.message.rfind(kRaisedPrefix, 0) == 0; }

}  // namespace memra::chat_template
