// What the request routes share to check a JSON body (chat/completions, /v1/responses,
// /v1/messages): the policy a route has for each top-level field it knows, and a checker
// that keeps the first problem found, as an OpenAI-style invalid_request error.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/server/api_error.hpp"

namespace memra::server {

// What a route does with a top-level field it knows (docs/SERVING.md lists each route's).
enum class FieldPolicy {
  honoured,      // parsed into the request
  harmless,      // accepted and not acted on (documented as such): metadata, user-like tags
  default_only,  // accepted only when null or its neutral value, else 400 unsupported_parameter
};

// A route's field table as docs/SERVING.md words it (the docs test compares the two).
template <typename Fields>
std::vector<std::pair<std::string, std::string>> policy_table(const Fields& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, policy] : fields)
    out.emplace_back(name, policy == FieldPolicy::honoured ? "honoured" : policy == FieldPolicy::harmless ? "harmless" : "neutral only");
  return out;
}

inline std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Collects the first problem found; checks stop at it (failed()).
struct BodyChecker {
  const nlohmann::ordered_json& body;
  std::optional<ApiError> error = std::nullopt;

  bool failed() const { return error.has_value(); }
  void fail(std::string code, std::string param, std::string message) {
    if (!error) error = errors::invalid_request(std::move(code), std::move(message), std::move(param));
  }
  void wrong_type(const std::string& param, const char* expected) {
    fail("invalid_type", param, quoted(param) + " must be " + expected);
  }
  // nullptr when the field is absent or null (OpenAI clients send null for "unset").
  const nlohmann::ordered_json* field(std::string_view name) const {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
  }
  // Refuses (unknown_parameter, naming `at.key`) a key of `obj` not in `keys`.
  bool only_keys(const nlohmann::ordered_json& obj, const std::string& at, std::initializer_list<const char*> keys) {
    for (const auto& [k, unused] : obj.items()) {
      bool known = false;
      for (const char* key : keys) known = known || k == key;
      if (!known) {
        fail("unknown_parameter", at + "." + k, "Unrecognized field: " + at + "." + k);
        return false;
      }
    }
    return true;
  }
};

}  // namespace memra::server
