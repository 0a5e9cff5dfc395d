// Routing for memra-host: match the route, check the method, authenticate,
// read and bound the body, call the route, and turn every failure into an
// OpenAI-shaped error. Works on Poco's HTTPRequest and a body stream, so tests
// can drive it without a socket; http_frontend.cpp feeds it complete requests.
#pragma once

#include <Poco/Net/HTTPRequest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/server/api_keys.hpp"
#include "host/server/http_reply.hpp"
#include "host/server/key_ring.hpp"
#include "host/server/metrics.hpp"
#include "host/server/server_state.hpp"

namespace memra::server {

class ModelSet;
class TenantAdmission;
class ResponseStore;

struct RouterConfig {
  std::size_t max_body_bytes = std::size_t{8} << 20;
  bool enable_test_routes = false;       // POST /debug/sleep, GET /debug/throw
  ModelSet* models = nullptr;            // the loaded models (null or empty: none)
  TenantAdmission* admission = nullptr;  // per-tenant limits (null: none)
  bool models_ready = false;             // every model loaded and its scheduler running
  std::string version = "unknown";       // system_fingerprint in completions
  std::int64_t default_max_tokens = 1024;  // --default-max-tokens (token_budget.hpp)
  int queue_timeout_ms = 30000;            // --queue-timeout-ms: the scheduler's queue, per request
  ResponseStore* responses = nullptr;      // /v1/responses' stored responses (null: none are kept)
};

// What a route knows about the request beyond HTTP.
struct RequestContext {
  std::uint64_t request_id = 0;
  std::string route = "unmatched";  // the matched route pattern (metrics label)
  std::shared_ptr<const KeyStore> keys;  // the key set this request was checked against (keeps `key` alive)
  const ApiKey* key = nullptr;      // the authenticated key when auth is on: tenant and limits
  bool body_consumed = false;       // the request body was read to its end
  std::function<bool()> client_gone;  // true once the client closed the connection (never null)
  std::chrono::steady_clock::time_point start;  // when the router got the request
  bool anthropic_errors = false;    // the path is an Anthropic-API route: errors in its shape
  std::string path_param;           // a path_param route's last segment, percent-decoded

  const std::string& tenant() const;  // the key's tenant, or "anonymous" when auth is off
};

class Router;
using RouteFn = Reply (*)(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest& request,
                          const std::string& body);

struct Route {
  std::string path;
  std::string method;
  bool open = false;      // reachable without an API key even when keys are configured
  bool has_body = false;  // takes a JSON body (Content-Type, size and read checks apply)
  RouteFn fn = nullptr;
  bool anthropic_errors = false;  // refusals in Anthropic's error shape (/v1/messages)
  // `path` ends in '/' and one more path segment follows it (an id: /v1/responses/{id}),
  // handed to the route as RequestContext::path_param; `path` + "{id}" is the metrics label.
  bool path_param = false;
};

class Router {
 public:
  // `keys` may be null: auth is off. `keys`, `metrics` and `state` must outlive the router.
  Router(RouterConfig config, const KeyRing* keys, Metrics& metrics, ServerState& state);

  // Handles one admitted request end to end. Never throws: an exception in a
  // route becomes a 500 JSON error. `client_gone` (may be empty) tells whether
  // the client has disconnected, so long requests can stop early.
  Reply handle(const Poco::Net::HTTPRequest& request, std::istream& body,
               std::function<bool()> client_gone = {});
  // Whether handle() would read this request's body (route, method, key, Content-Type
  // and a declared length all pass): the HTTP front end reads a body only then, so an
  // unauthenticated or misrouted client never makes the server read its body.
  bool reads_body(const Poco::Net::HTTPRequest& request) const;
  // The 503 for a request that arrives while the server drains.
  Reply reject_draining(const Poco::Net::HTTPRequest& request);

  const RouterConfig& config() const { return config_; }
  Metrics& metrics() const { return metrics_; }
  ServerState& state() const { return state_; }
  bool auth_enabled() const { return keys_ != nullptr; }
  const std::vector<Route>& routes() const { return routes_; }

 private:
  Reply dispatch(RequestContext& ctx, const Poco::Net::HTTPRequest& request, std::istream& body);
  std::optional<Reply> precheck(RequestContext& ctx, const Poco::Net::HTTPRequest& request, const Route*& route,
                                bool log) const;

  RouterConfig config_;
  const KeyRing* keys_;
  Metrics& metrics_;
  ServerState& state_;
  std::vector<Route> routes_;
};

// Route tables, one file each.
std::vector<Route> info_routes();       // /health, /ready, /v1/models, /metrics
std::vector<Route> inference_routes();  // /v1/chat/completions, /v1/completions
std::vector<Route> responses_routes();  // /v1/responses
std::vector<Route> messages_routes();   // /v1/messages (Anthropic)
std::vector<Route> tokenize_routes();   // /tokenize, /detokenize
std::vector<Route> embeddings_routes(); // /v1/embeddings
std::vector<Route> debug_routes();      // only with --enable-test-routes

}  // namespace memra::server
