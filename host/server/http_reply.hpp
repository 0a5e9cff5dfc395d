// A complete HTTP reply produced by a route, independent of Poco's response
// object so routes can be unit-tested without sockets.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "host/server/api_error.hpp"

namespace memra::server {

// Where a streamed reply's body goes (Server-Sent Events over chunked encoding).
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // Sends `data` now; false when the client has gone away (nothing more will arrive).
  virtual bool write(std::string_view data) = 0;
  // True when the client closed its connection (checked without blocking).
  virtual bool client_gone() = 0;
};

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Close the connection after this reply (e.g. an unread request body remains).
  bool close_connection = false;
  // When set, the status and headers are sent first and then this writes the body
  // (chunked); `body` is unused. Runs on the request's thread.
  std::function<void(StreamSink&)> stream;
  // The error this reply reports (error_reply), so the router can render it in the
  // route's own error shape.
  std::optional<ApiError> error;

  void add_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
  // The first header with this name (case-insensitive), or "" if none.
  std::string header(const std::string& name) const;
};

// 200..599 with a JSON body; the body gets a trailing newline (friendlier for curl).
Reply json_reply(int status, std::string json_body);
// The OpenAI-shaped error reply for `error`.
Reply error_reply(const ApiError& error);

}  // namespace memra::server
