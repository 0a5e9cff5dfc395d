#include "host/server/http_wire.hpp"

#include <Poco/Net/HTTPResponse.h>
#include <Poco/Timestamp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <sstream>

namespace memra::server {
namespace {

Poco::Net::HTTPResponse response_for(const Reply& reply, const std::string& version, bool keep_alive,
                                     const std::string& server_header) {
  Poco::Net::HTTPResponse r;
  r.setVersion(version);
  r.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(reply.status));
  r.setContentType(reply.content_type);
  for (const auto& [name, value] : reply.headers) r.set(name, value);
  r.setDate(Poco::Timestamp());
  if (!server_header.empty()) r.set("Server", server_header);
  r.setKeepAlive(keep_alive);
  return r;
}

std::string serialise(const Poco::Net::HTTPResponse& r) {
  std::ostringstream out;
  r.write(out);
  return out.str();
}

}  // namespace

std::string reply_head(const Reply& reply, const Poco::Net::HTTPRequest& request, bool keep_alive, BodyMode mode,
                       const std::string& server_header) {
  const std::string version = request.getVersion() == Poco::Net::HTTPMessage::HTTP_1_0
                                  ? Poco::Net::HTTPMessage::HTTP_1_0
                                  : Poco::Net::HTTPMessage::HTTP_1_1;
  Poco::Net::HTTPResponse r = response_for(reply, version, keep_alive && mode != BodyMode::until_close, server_header);
  if (mode == BodyMode::chunked) r.setChunkedTransferEncoding(true);
  if (mode == BodyMode::length) r.setContentLength64(static_cast<Poco::Int64>(reply.body.size()));
  return serialise(r);
}

std::string reply_bytes(const Reply& reply, const Poco::Net::HTTPRequest& request, bool keep_alive,
                        const std::string& server_header) {
  std::string out = reply_head(reply, request, keep_alive, BodyMode::length, server_header);
  if (request.getMethod() != Poco::Net::HTTPRequest::HTTP_HEAD) out += reply.body;
  return out;
}

std::string bare_error_bytes(const ApiError& error, const std::string& server_header) {
  const Reply reply = error_reply(error);
  Poco::Net::HTTPResponse r = response_for(reply, Poco::Net::HTTPMessage::HTTP_1_1, false, server_header);
  r.setContentLength64(static_cast<Poco::Int64>(reply.body.size()));
  return serialise(r) + reply.body;
}

std::optional<std::size_t> send_some(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return std::nullopt;
  }
  return done;
}

bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    const auto sent = send_some(fd, data);
    if (!sent) return false;
    data.remove_prefix(*sent);
    if (data.empty()) break;
    pollfd p{fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
  }
  return true;
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL | POLLRDHUP)) return true;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool SocketSink::write(std::string_view data) {
  if (broken_) return false;
  if (data.empty()) return true;
  if (chunked_) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string frame = size;
    frame.append(data);
    frame += "\r\n";
    broken_ = !send_all(fd_, frame, timeout_);
  } else {
    broken_ = !send_all(fd_, data, timeout_);
  }
  return !broken_;
}

bool SocketSink::client_gone() {
  if (!broken_ && peer_closed(fd_)) broken_ = true;
  return broken_;
}

bool SocketSink::finish() {
  if (broken_) return false;
  if (chunked_) broken_ = !send_all(fd_, "0\r\n\r\n", timeout_);
  return !broken_;
}

}  // namespace memra::server
