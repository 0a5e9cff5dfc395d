// Writing replies on a client socket: the status line and headers (Poco's
// HTTPResponse serialiser), whole bodies, and streamed bodies as chunks. Sockets
// are non-blocking (the front end's loop owns reads); writes wait for room with
// poll() up to a per-write timeout, so a client that stops reading loses its
// connection instead of holding a thread forever.
#pragma once

#include <Poco/Net/HTTPRequest.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "host/server/http_reply.hpp"

namespace memra::server {

// How a reply's body travels.
enum class BodyMode {
  length,   // Content-Length and the body (for HEAD: the length, no body)
  chunked,  // a stream to an HTTP/1.1 client
  until_close,  // a stream to an HTTP/1.0 client: no framing, the connection closes at its end
};

// The status line and headers of `reply` for `request`. `keep_alive` false adds
// "Connection: close".
std::string reply_head(const Reply& reply, const Poco::Net::HTTPRequest& request, bool keep_alive, BodyMode mode,
                       const std::string& server_header);
// The whole wire form of a non-streamed reply (the body left out for HEAD).
std::string reply_bytes(const Reply& reply, const Poco::Net::HTTPRequest& request, bool keep_alive,
                        const std::string& server_header);
// A reply to a request that could not be parsed (no request to answer in kind):
// HTTP/1.1, Connection: close.
std::string bare_error_bytes(const ApiError& error, const std::string& server_header);

// Writes all of `data`, waiting at most `timeout` for each bit of room. False when
// the client is gone or stopped reading.
bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout);
// Writes what fits now; returns the bytes written, or nullopt when the socket failed.
std::optional<std::size_t> send_some(int fd, std::string_view data);
// The peer closed its side (readable with nothing to read, or hung up); pipelined
// bytes waiting to be read do not count.
bool peer_closed(int fd);

// A stream's body on a socket: chunk-framed for HTTP/1.1, raw for HTTP/1.0.
class SocketSink : public StreamSink {
 public:
  SocketSink(int fd, bool chunked, std::chrono::milliseconds timeout) : fd_(fd), chunked_(chunked), timeout_(timeout) {}
  bool write(std::string_view data) override;
  bool client_gone() override;
  // The last chunk (chunked streams); false when the client is gone.
  bool finish();
  bool broken() const { return broken_; }
  void set_broken() { broken_ = true; }

 private:
  int fd_;
  bool chunked_;
  std::chrono::milliseconds timeout_;
  bool broken_ = false;
};

}  // namespace memra::server
