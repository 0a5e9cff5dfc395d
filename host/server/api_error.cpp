#include "host/server/api_error.hpp"

#include <nlohmann/json.hpp>

namespace memra::server {

std::string error_body(const ApiError& error) {
  // ordered_json keeps OpenAI's field order (message first) for human readers.
  nlohmann::ordered_json param = nullptr;
  if (error.param) param = *error.param;
  nlohmann::ordered_json body = {{"error",
                          {{"message", error.message},
                           {"type", error.type},
                           {"code", error.code},
                           {"param", param}}}};
  // `replace` keeps invalid UTF-8 from a client (echoed paths) from throwing.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace errors {
namespace {
constexpr const char* kInvalidRequest = "invalid_request_error";
constexpr const char* kUnavailable = "service_unavailable_error";

ApiError make(int status, const char* type, std::string code, std::string message,
              std::optional<std::string> param = std::nullopt) {
  return ApiError{status, type, std::move(code), std::move(message), std::move(param)};
}
}  // namespace

ApiError unknown_route(std::string_view method, std::string_view path) {
  return make(404, "not_found_error", "unknown_route",
              "no route " + std::string(method) + " " + std::string(path) +
                  "; the API is under /v1 (see docs/SERVING.md)");
}

ApiError method_not_allowed(std::string_view method, std::string_view path, std::string_view allow) {
  return make(405, kInvalidRequest, "method_not_allowed",
              "method " + std::string(method) + " is not allowed on " + std::string(path) + "; use " +
                  std::string(allow));
}

ApiError missing_api_key() {
  return make(401, "authentication_error", "missing_api_key",
              "this server requires an API key: send the header 'Authorization: Bearer <key>'");
}

ApiError invalid_api_key() {
  return make(401, "authentication_error", "invalid_api_key",
              "the API key is not known to this server; check the key or ask the operator for one");
}

ApiError api_key_disabled() {
  return make(403, "permission_error", "api_key_disabled",
              "this API key is disabled; ask the operator to enable it or use another key");
}

ApiError body_too_large(std::size_t limit, std::string_view how) {
  return make(413, kInvalidRequest, "request_too_large",
              "the request body " + std::string(how) + " the limit of " + std::to_string(limit) +
                  " bytes (memra-host --max-body-bytes); send a smaller request");
}

ApiError unsupported_media_type(std::string_view content_type) {
  return make(415, kInvalidRequest, "unsupported_media_type",
              "Content-Type '" + std::string(content_type) +
                  "' is not supported; send the body as JSON with 'Content-Type: application/json'");
}

ApiError body_read_failed(std::string_view detail) {
  return make(400, kInvalidRequest, "body_read_failed",
              "could not read the request body: " + std::string(detail));
}

ApiError invalid_json(std::string_view detail) {
  return make(400, kInvalidRequest, "invalid_json",
              "the request body is not valid JSON: " + std::string(detail));
}

ApiError invalid_request(std::string code, std::string message, std::optional<std::string> param) {
  return make(400, kInvalidRequest, std::move(code), std::move(message), std::move(param));
}

ApiError model_not_loaded() {
  return make(503, kUnavailable, "model_not_loaded",
              "no model is loaded yet; wait for GET /ready to answer 200", "model");
}

ApiError model_not_found(std::string_view model) {
  return make(404, "not_found_error", "model_not_found",
              "the model '" + std::string(model) + "' is not loaded here; GET /v1/models lists the loaded ones",
              "model");
}

ApiError context_length_exceeded(std::string message, std::string param) {
  return make(400, kInvalidRequest, "context_length_exceeded", std::move(message), std::move(param));
}

ApiError kv_budget_exceeded(std::int64_t need, std::int64_t limit) {
  return make(400, kInvalidRequest, "kv_budget_exceeded",
              "this request needs " + std::to_string(need) + " KV tokens (prompt + max_tokens, times n) but your "
              "API key's limit is " + std::to_string(limit) + "; lower max_tokens or n",
              "max_tokens");
}

ApiError tenant_rate_limited(std::string_view tenant, std::string_view why) {
  return make(429, "rate_limit_error", "rate_limit_exceeded",
              "tenant '" + std::string(tenant) + "' is at its limit (" + std::string(why) +
                  "); retry after the Retry-After delay");
}

ApiError server_overloaded(std::string_view detail) {
  return make(503, kUnavailable, "server_overloaded",
              "the server is at capacity (" + std::string(detail) + "); retry after the Retry-After delay");
}

ApiError client_closed() {
  return make(499, kInvalidRequest, "client_closed_request", "the client closed the connection before the answer");
}

ApiError generation_failed(std::string_view detail) {
  return make(500, "server_error", "generation_failed",
              "generation failed inside the engine (" + std::string(detail) +
                  "); this is a bug in memra-host, please report it with the server log");
}

ApiError not_ready(std::string code, std::string_view reason) {
  return make(503, kUnavailable, std::move(code), "not ready: " + std::string(reason));
}

ApiError shutting_down() {
  return make(503, kUnavailable, "server_shutting_down",
              "the server is shutting down and takes no new requests; retry on another instance");
}

ApiError internal(std::string_view what) {
  return make(500, "server_error", "internal_error",
              "internal error while handling the request (" + std::string(what) +
                  "); this is a bug in memra-host, please report it with the server log");
}

ApiError framing(int status, std::string code, std::string message) {
  return make(status, kInvalidRequest, std::move(code), std::move(message));
}

ApiError request_timeout(std::string code, std::string_view what) {
  return make(408, kInvalidRequest, std::move(code),
              std::string(what) + "; the connection is closed (memra-host --header-timeout-ms, --body-timeout-ms, "
                                  "--min-receive-rate)");
}

ApiError too_many_connections(std::string_view detail) {
  return make(503, kUnavailable, "too_many_connections",
              "the server has too many open connections (" + std::string(detail) + "); retry later");
}

}  // namespace errors
}  // namespace memra::server
