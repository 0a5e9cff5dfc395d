#include "host/server/request_validation.hpp"

#include <array>
#include <nlohmann/json.hpp>

namespace memra::server {
namespace {

using nlohmann::json;

// Collects the first problem found; the checks below stop at it.
struct Checker {
  const json& body;
  std::optional<ApiError> error;

  bool failed() const { return error.has_value(); }

  void fail(std::string code, std::string param, std::string message) {
    if (!error) error = errors::invalid_request(std::move(code), std::move(message), std::move(param));
  }
  void wrong_type(const std::string& param, const char* expected) {
    fail("invalid_type", param, "'" + param + "' must be " + expected);
  }

  // nullptr when the field is absent or null (OpenAI clients send null for "unset").
  const json* optional_field(const char* name) const {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
  }

  void number_in(const char* name, double lo, double hi) {
    const json* v = optional_field(name);
    if (!v || failed()) return;
    if (!v->is_number()) return wrong_type(name, "a number");
    const double x = v->get<double>();
    if (x < lo || x > hi) {
      fail("invalid_value", name,
           "'" + std::string(name) + "' must be between " + json(lo).dump() + " and " + json(hi).dump());
    }
  }
  void integer_at_least(const char* name, std::int64_t lo) {
    const json* v = optional_field(name);
    if (!v || failed()) return;
    if (!v->is_number_integer()) return wrong_type(name, "an integer");
    if (v->get<std::int64_t>() < lo) {
      fail("invalid_value", name, "'" + std::string(name) + "' must be at least " + std::to_string(lo));
    }
  }
  void boolean(const char* name) {
    const json* v = optional_field(name);
    if (v && !failed() && !v->is_boolean()) wrong_type(name, "true or false");
  }
  void object(const char* name) {
    const json* v = optional_field(name);
    if (v && !failed() && !v->is_object()) wrong_type(name, "an object");
  }
  void stop_sequences() {
    const json* v = optional_field("stop");
    if (!v || failed() || v->is_string()) return;
    if (!v->is_array()) return wrong_type("stop", "a string or an array of strings");
    for (const auto& s : *v) {
      if (!s.is_string()) return wrong_type("stop", "a string or an array of strings");
    }
  }

  void model() {
    auto it = body.find("model");
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", "model", "'model' is required; GET /v1/models lists the models");
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      wrong_type("model", "a non-empty string");
    }
  }

  void sampling() {
    boolean("stream");
    object("stream_options");
    number_in("temperature", 0.0, 2.0);
    number_in("top_p", 0.0, 1.0);
    number_in("presence_penalty", -2.0, 2.0);
    number_in("frequency_penalty", -2.0, 2.0);
    integer_at_least("max_tokens", 1);
    integer_at_least("n", 1);
    integer_at_least("seed", INT64_MIN);
    stop_sequences();
  }

  void messages() {
    auto it = body.find("messages");
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", "messages", "'messages' is required: an array of {role, content}");
    }
    if (!it->is_array()) return wrong_type("messages", "an array of {role, content} objects");
    if (it->empty()) return fail("invalid_value", "messages", "'messages' must contain at least one message");
    static constexpr std::array<const char*, 6> kRoles = {"system", "developer", "user", "assistant", "tool",
                                                          "function"};
    for (std::size_t i = 0; i < it->size() && !failed(); ++i) {
      const json& m = (*it)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object()) return wrong_type(at, "an object with 'role' and 'content'");
      auto role = m.find("role");
      if (role == m.end() || !role->is_string()) {
        return fail("missing_required_parameter", at + ".role", "'" + at + ".role' is required (a string)");
      }
      const auto& r = role->get_ref<const std::string&>();
      bool known = false;
      for (const char* k : kRoles) known = known || r == k;
      if (!known) {
        return fail("invalid_value", at + ".role",
                    "'" + at + ".role' is '" + r + "'; expected system, developer, user, assistant or tool");
      }
      auto content = m.find("content");
      const bool may_omit = r == "assistant";  // an assistant turn may carry only tool_calls
      if (content == m.end() || content->is_null()) {
        if (!may_omit) {
          return fail("missing_required_parameter", at + ".content", "'" + at + ".content' is required");
        }
      } else if (!content->is_string() && !content->is_array()) {
        return wrong_type(at + ".content", "a string or an array of content parts");
      }
    }
  }

  void prompt() {
    auto it = body.find("prompt");
    if (it == body.end() || it->is_null()) {
      return fail("missing_required_parameter", "prompt", "'prompt' is required: a string or token ids");
    }
    const json& p = *it;
    if (p.is_string()) return;
    const char* expected = "a string, an array of strings, an array of token ids or an array of arrays of token ids";
    if (!p.is_array() || p.empty()) return wrong_type("prompt", expected);
    auto is_token = [](const json& t) { return t.is_number_integer() && t.get<std::int64_t>() >= 0; };
    auto all = [&](const json& arr, auto pred) {
      for (const auto& e : arr) {
        if (!pred(e)) return false;
      }
      return true;
    };
    const bool strings = all(p, [](const json& e) { return e.is_string(); });
    const bool tokens = all(p, is_token);
    const bool token_lists = all(p, [&](const json& e) { return e.is_array() && !e.empty() && all(e, is_token); });
    if (!strings && !tokens && !token_lists) wrong_type("prompt", expected);
  }
};

}  // namespace

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Validation validate_completion_body(CompletionKind kind, std::string_view body) {
  Validation out;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    out.error = errors::invalid_json("the body is empty; send a JSON object");
    return out;
  }
  if (json_nesting_depth(body) > kMaxJsonDepth) {
    out.error = errors::invalid_json("nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return out;
  }
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::parse_error& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    const auto pos = what.find("] ");
    out.error = errors::invalid_json(pos == std::string::npos ? what : what.substr(pos + 2));
    return out;
  }
  if (!doc.is_object()) {
    out.error = errors::invalid_request("invalid_body", "the request body must be a JSON object", std::nullopt);
    return out;
  }
  Checker check{doc, std::nullopt};
  check.model();
  if (kind == CompletionKind::chat) {
    check.messages();
    check.integer_at_least("max_completion_tokens", 1);
  } else {
    check.prompt();
    check.boolean("echo");
    check.integer_at_least("logprobs", 0);
    check.integer_at_least("best_of", 1);
  }
  check.sampling();
  if (check.failed()) {
    out.error = std::move(check.error);
    return out;
  }
  CompletionRequest request;
  request.kind = kind;
  request.model = doc["model"].get<std::string>();
  const json* stream = check.optional_field("stream");
  request.stream = stream != nullptr && stream->get<bool>();
  out.request = std::move(request);
  return out;
}

}  // namespace memra::server
