// memra-host's HTTP front end: one event loop (epoll) owns every client
// connection while it is idle or being read, so a slow or idle client holds a
// file descriptor and a buffer, never a thread. A request reaches a thread only
// once its head and body are complete:
//   - GET/HEAD /health and /ready are answered by the loop itself, at once;
//   - GET/HEAD /metrics by a pool of its own (2 threads);
//   - everything else by the worker pool (--threads), one thread per request from
//     the route's start to the reply's last byte (a stream holds its thread until it
//     ends); complete requests wait in a bounded queue when every worker is busy.
// Reading is bounded: the whole head within header_timeout_ms of its first byte, the
// whole body within body_timeout_ms of the head, and both at min_receive_rate bytes/s
// on average after a grace period; connections are capped in total and per client
// address. Poco still parses every request head and writes every response head
// (http_framing.cpp, http_wire.cpp). docs/SERVING.md, "Threads and connections".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "host/server/router.hpp"
#include "host/server/server_state.hpp"

namespace memra::server {

struct FrontendOptions {
  int worker_threads = 64;
  int probe_threads = 2;
  std::size_t max_queued = 256;             // complete requests waiting for a worker; then 503
  std::size_t max_header_bytes = 64 << 10;  // request line + fields; then 431
  std::size_t max_body_bytes = std::size_t{8} << 20;
  std::size_t discard_budget = 1 << 20;     // chunked bytes read and dropped after the limit, before the 413
  int header_timeout_ms = 10000;            // first byte of a request -> end of its head
  int body_timeout_ms = 60000;              // end of the head -> end of the body
  int idle_timeout_ms = 10000;              // a connection with no request in progress
  std::int64_t min_receive_rate = 1024;     // bytes/s averaged over a request's read; 0 = off
  int rate_grace_ms = 2000;                 // the rate floor applies from this age of the read on
  int send_timeout_ms = 30000;              // a client that takes no bytes for this long is dropped
  int max_connections = 4096;               // open connections in all; then 503 and close
  int max_client_connections = 256;         // open connections per client address; 0 = no limit
  std::string server_header;                // "memra-host/0.1.0"
};

// The client address of a connected socket ("?" when unknown), as the per-address caps key it.
std::string peer_address(int fd);

class HttpFrontend {
 public:
  // `listen_fd`: a bound, listening socket (made non-blocking here; not closed here), or
  // -1 when connections only come through adopt() (TLS: tls_listener.hpp).
  HttpFrontend(Router& router, ServerState& state, int listen_fd, FrontendOptions options);
  ~HttpFrontend();  // stop()
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  void start();
  // Stops accepting, closes every connection that is not inside a request, lets the
  // requests being handled finish writing (up to 2 s), then joins every thread.
  void stop();
  std::size_t connections() const;
  // Takes a connected socket as if the loop had accepted it from `peer` (the caps per
  // client address apply to `peer`); closed at once once stop() has begun. Any thread.
  void adopt(int fd, std::string peer);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::server
