// OpenAI-shaped API errors: every error memra-host answers has the body
//   {"error":{"message":"...","type":"...","code":"...","param":null|"..."}}
// and Content-Type application/json. docs/SERVING.md lists every status/code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memra::server {

struct ApiError {
  int status = 500;
  std::string type;                  // e.g. "invalid_request_error"
  std::string code;                  // machine-readable, e.g. "invalid_json"
  std::string message;               // what went wrong and what to do
  std::optional<std::string> param;  // the offending request field, if any
};

// The JSON body for `error` (no trailing newline).
std::string error_body(const ApiError& error);

// The errors the server answers, one constructor each so statuses and codes
// stay consistent across routes.
namespace errors {
ApiError unknown_route(std::string_view method, std::string_view path);
ApiError method_not_allowed(std::string_view method, std::string_view path, std::string_view allow);
ApiError missing_api_key();
ApiError invalid_api_key();
ApiError api_key_disabled();
ApiError body_too_large(std::size_t limit, std::string_view how);
ApiError unsupported_media_type(std::string_view content_type);
ApiError body_read_failed(std::string_view detail);
ApiError invalid_json(std::string_view detail);
ApiError invalid_request(std::string code, std::string message, std::optional<std::string> param);
ApiError model_not_loaded();
ApiError model_not_found(std::string_view model);
ApiError context_length_exceeded(std::string message, std::string param);
ApiError kv_budget_exceeded(std::int64_t need, std::int64_t limit);
ApiError tenant_rate_limited(std::string_view tenant, std::string_view why);
ApiError server_overloaded(std::string_view detail);
ApiError client_closed();
ApiError generation_failed(std::string_view detail);
ApiError not_ready(std::string code, std::string_view reason);
ApiError shutting_down();
ApiError internal(std::string_view what);
// Refused by the HTTP front end before routing (http_frontend.cpp).
ApiError framing(int status, std::string code, std::string message);
ApiError request_timeout(std::string code, std::string_view what);
ApiError too_many_connections(std::string_view detail);
}  // namespace errors

}  // namespace memra::server
