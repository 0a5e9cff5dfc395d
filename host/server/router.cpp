#include "host/server/router.hpp"

#include <Poco/Exception.h>
#include <Poco/Logger.h>
#include <Poco/Net/MediaType.h>
#include <Poco/String.h>
#include <Poco/URI.h>

#include <algorithm>
#include <chrono>

#include "host/server/body_reader.hpp"
#include "host/server/messages_format.hpp"

namespace memra::server {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

bool request_has_body(const Poco::Net::HTTPRequest& request) {
  return request.getChunkedTransferEncoding() ||
         (request.hasContentLength() && request.getContentLength64() > 0);
}

// Missing Content-Type is accepted as JSON (curl -d sends form encoding only when
// asked to; many clients omit the header). Anything else must be application/json.
bool is_json_content_type(const std::string& value) {
  if (value.empty()) return true;
  try {
    Poco::Net::MediaType type(value);
    return Poco::icompare(type.getType(), "application") == 0 && Poco::icompare(type.getSubType(), "json") == 0;
  } catch (const Poco::Exception&) {
    return false;
  }
}

}  // namespace

const std::string& RequestContext::tenant() const {
  static const std::string kAnonymous = "anonymous";
  return key != nullptr ? key->tenant : kAnonymous;
}

Router::Router(RouterConfig config, const KeyRing* keys, Metrics& metrics, ServerState& state)
    : config_(std::move(config)), keys_(keys), metrics_(metrics), state_(state) {
  for (auto&& table : {info_routes(), inference_routes(), responses_routes(), messages_routes(), tokenize_routes(),
                       embeddings_routes()}) {
    routes_.insert(routes_.end(), table.begin(), table.end());
  }
  if (config_.enable_test_routes) {
    auto debug = debug_routes();
    routes_.insert(routes_.end(), debug.begin(), debug.end());
  }
}

Reply Router::handle(const Poco::Net::HTTPRequest& request, std::istream& body, std::function<bool()> client_gone) {
  const auto start = std::chrono::steady_clock::now();
  RequestContext ctx;
  ctx.request_id = state_.next_request_id();
  ctx.start = start;
  ctx.client_gone = client_gone ? std::move(client_gone) : std::function<bool()>([] { return false; });
  metrics_.add_in_flight(1);
  Reply reply;
  try {
    reply = dispatch(ctx, request, body);
  } catch (const std::exception& e) {
    logger().error("request %s: %s %s failed: %s", std::to_string(ctx.request_id), request.getMethod(),
                   request.getURI(), std::string(e.what()));
    reply = error_reply(errors::internal(e.what()));
  } catch (...) {
    logger().error("request %s: %s %s failed with a non-standard exception", std::to_string(ctx.request_id),
                   request.getMethod(), request.getURI());
    reply = error_reply(errors::internal("unknown exception"));
  }
  if (ctx.anthropic_errors && reply.error && !reply.stream)
    reply.body = anthropic_error_body(*reply.error, "req-" + std::to_string(ctx.request_id)) + "\n";
  if (!ctx.body_consumed && request_has_body(request)) reply.close_connection = true;
  reply.add_header("x-request-id", "req-" + std::to_string(ctx.request_id));
  if (ctx.anthropic_errors) reply.add_header("request-id", "req-" + std::to_string(ctx.request_id));  // as Anthropic's API names it
  // Bookkeeping once the reply is complete: now, or after a streamed body.
  auto finish = [this, route = ctx.route, method = request.getMethod(), uri = request.getURI(),
                 id = ctx.request_id, tenant = ctx.key ? ", tenant " + ctx.key->tenant : std::string(),
                 start](int status) {
    metrics_.add_in_flight(-1);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    metrics_.record_request(route, method, status, seconds);
    // The access log: one line per request at the default level.
    if (logger().information()) {
      logger().information("request %s: %s %s -> %d (%s ms%s)", std::to_string(id), method, uri, status,
                           std::to_string(static_cast<long>(seconds * 1000)), tenant);
    }
  };
  if (reply.stream) {
    reply.stream = [inner = std::move(reply.stream), finish, status = reply.status](StreamSink& sink) {
      try {
        inner(sink);
      } catch (const std::exception& e) {
        logger().error("streamed reply failed: %s", std::string(e.what()));
      } catch (...) {
        logger().error("streamed reply failed with a non-standard exception");
      }
      finish(status);
    };
  } else {
    finish(reply.status);
  }
  return reply;
}

Reply Router::reject_draining(const Poco::Net::HTTPRequest& request) {
  Reply reply = error_reply(errors::shutting_down());
  try {
    const std::string path = Poco::URI(request.getURI()).getPath();
    for (const auto& r : routes_)
      if (r.path == path && r.anthropic_errors) reply.body = anthropic_error_body(*reply.error) + "\n";
  } catch (const Poco::Exception&) {
  }
  reply.add_header("Retry-After", "5");
  reply.close_connection = true;
  metrics_.record_request("draining", request.getMethod(), reply.status, 0.0);
  return reply;
}

// The checks before the body is read, in the documented order: a refusal, or the
// route (auth filled into ctx). `log` is false for reads_body(), which only asks.
std::optional<Reply> Router::precheck(RequestContext& ctx, const Poco::Net::HTTPRequest& request, const Route*& route,
                                      bool log) const {
  route = nullptr;
  std::string path;
  try {
    path = Poco::URI(request.getURI()).getPath();
  } catch (const Poco::Exception& e) {
    return error_reply(errors::invalid_request("invalid_uri", "the request target is not a valid URI: " +
                                                                  e.displayText(), std::nullopt));
  }
  const std::string& method = request.getMethod();

  // Ambiguous body framing is how requests are smuggled past a proxy: refuse it, and
  // close the connection, since where this request's body ends is not known. (The
  // HTTP front end refuses it before routing; this keeps the router safe on its own.)
  {
    std::string length;
    int lengths = 0;
    for (auto it = request.find("Content-Length"); it != request.end() && Poco::icompare(it->first, "Content-Length") == 0; ++it) {
      if (lengths++ > 0 && it->second != length) {
        Reply reply = error_reply(errors::invalid_request("conflicting_content_length",
                                                           "the request has Content-Length headers that disagree (" + length +
                                                               ", " + it->second + "); send one",
                                                           std::nullopt));
        reply.close_connection = true;
        return reply;
      }
      length = it->second;
    }
    if (lengths > 0 && request.has("Transfer-Encoding")) {
      Reply reply = error_reply(errors::invalid_request(
          "conflicting_framing", "the request has both Content-Length and Transfer-Encoding; send one", std::nullopt));
      reply.close_connection = true;
      return reply;
    }
  }

  std::vector<std::string> allowed;
  std::string route_label = path;
  for (const auto& r : routes_) {
    if (r.path_param) {
      // A prefix and one non-empty segment: /v1/responses/resp_1 (not /v1/responses/ or /a/b).
      if (path.size() <= r.path.size() || path.compare(0, r.path.size(), r.path) != 0 ||
          path.find('/', r.path.size()) != std::string::npos)
        continue;
      ctx.path_param = path.substr(r.path.size());
      route_label = r.path + "{id}";
    } else if (r.path != path) {
      continue;
    }
    ctx.anthropic_errors = r.anthropic_errors;
    allowed.push_back(r.method);
    // HEAD is GET without the body (RFC 9110 9.3.2): the GET route answers it and the
    // front end sends the status and headers only.
    if (r.method == "GET") allowed.push_back("HEAD");
    if (r.method == method || (method == "HEAD" && r.method == "GET")) route = &r;
  }
  if (allowed.empty()) return error_reply(errors::unknown_route(method, path));
  ctx.route = route_label;
  if (route == nullptr) {
    std::sort(allowed.begin(), allowed.end());
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    Reply reply = error_reply(errors::method_not_allowed(method, path, allow));
    reply.add_header("Allow", allow);
    return reply;
  }

  if (keys_ != nullptr && !route->open) {
    ctx.keys = keys_->current();
    // Anthropic clients send the key as x-api-key.
    std::string authorization = request.get("Authorization", "");
    if (authorization.empty() && request.has("x-api-key")) authorization = "Bearer " + request.get("x-api-key");
    const auto auth = ctx.keys->authenticate(authorization);
    switch (auth.outcome) {
      case AuthOutcome::ok:
        ctx.key = auth.key;
        break;
      case AuthOutcome::disabled:
        if (log)
          logger().information("request %s: refused a disabled API key (tenant %s, keys[%s])",
                               std::to_string(ctx.request_id), auth.key->tenant, std::to_string(auth.key->index));
        return error_reply(errors::api_key_disabled());
      case AuthOutcome::missing:
      case AuthOutcome::unknown: {
        Reply reply = error_reply(auth.outcome == AuthOutcome::missing ? errors::missing_api_key()
                                                                       : errors::invalid_api_key());
        reply.add_header("WWW-Authenticate", "Bearer realm=\"memra\"");
        return reply;
      }
    }
  }
  if (route->has_body) {
    const std::string content_type = request.getContentType();
    if (!is_json_content_type(content_type)) return error_reply(errors::unsupported_media_type(content_type));
    if (request.hasContentLength() && !request.getChunkedTransferEncoding() &&
        static_cast<std::uint64_t>(request.getContentLength64()) > config_.max_body_bytes)
      return error_reply(errors::body_too_large(config_.max_body_bytes, "declares Content-Length " +
                                                                             std::to_string(request.getContentLength64()) +
                                                                             ", over"));
  }
  return std::nullopt;
}

bool Router::reads_body(const Poco::Net::HTTPRequest& request) const {
  if (state_.draining()) return false;  // answered 503 without reading
  RequestContext ctx;
  const Route* route = nullptr;
  try {
    return !precheck(ctx, request, route, /*log=*/false) && route != nullptr && route->has_body;
  } catch (const std::exception&) {
    return false;  // handle() reports it
  }
}

Reply Router::dispatch(RequestContext& ctx, const Poco::Net::HTTPRequest& request, std::istream& body) {
  const Route* route = nullptr;
  if (auto refused = precheck(ctx, request, route, /*log=*/true)) return std::move(*refused);

  std::string text;
  if (route->has_body) {
    std::optional<std::uint64_t> length;
    if (request.hasContentLength()) length = static_cast<std::uint64_t>(request.getContentLength64());
    BodyRead read = read_body(body, length, request.getChunkedTransferEncoding(), config_.max_body_bytes);
    ctx.body_consumed = read.fully_consumed;
    switch (read.kind) {
      case BodyRead::Kind::too_large:
        return error_reply(errors::body_too_large(config_.max_body_bytes, read.detail));
      case BodyRead::Kind::read_error:
        return error_reply(errors::body_read_failed(read.detail));
      case BodyRead::Kind::ok:
        text = std::move(read.body);
        break;
    }
  }
  return route->fn(*this, ctx, request, text);
}

}  // namespace memra::server
