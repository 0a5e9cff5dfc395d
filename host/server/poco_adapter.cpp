#include "host/server/poco_adapter.hpp"

#include <Poco/Logger.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/StreamSocket.h>

#include <ostream>

namespace memra::server {
namespace {

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

// True when the peer has closed the connection: the socket is readable but has
// no bytes (a pipelined next request would leave bytes to read).
bool peer_closed(Poco::Net::StreamSocket* socket) {
  if (socket == nullptr) return false;
  try {
    if (!socket->poll(Poco::Timespan(0), Poco::Net::Socket::SELECT_READ | Poco::Net::Socket::SELECT_ERROR)) {
      return false;
    }
    return socket->available() <= 0;
  } catch (const std::exception&) {
    return true;
  }
}

class SocketSink : public StreamSink {
 public:
  SocketSink(std::ostream* out, Poco::Net::StreamSocket* socket) : out_(out), socket_(socket) {}
  bool write(std::string_view data) override {
    if (out_ == nullptr || broken_) return false;
    try {
      out_->write(data.data(), static_cast<std::streamsize>(data.size()));
      out_->flush();
      broken_ = !out_->good();
    } catch (const std::exception& e) {
      broken_ = true;
    }
    return !broken_;
  }
  bool client_gone() override {
    if (!broken_ && peer_closed(socket_)) broken_ = true;
    return broken_ || out_ == nullptr;
  }

 private:
  std::ostream* out_;
  Poco::Net::StreamSocket* socket_;
  bool broken_ = false;
};

void write_headers(const Reply& reply, const Poco::Net::HTTPServerRequest& request,
                   Poco::Net::HTTPServerResponse& response) {
  response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(reply.status));
  response.setContentType(reply.content_type);
  for (const auto& [name, value] : reply.headers) response.set(name, value);
  if (reply.close_connection || !request.getKeepAlive()) response.setKeepAlive(false);
}

void write_reply(const Reply& reply, const Poco::Net::HTTPServerRequest& request,
                 Poco::Net::HTTPServerResponse& response, Poco::Net::StreamSocket* socket) {
  write_headers(reply, request, response);
  if (reply.stream) {
    response.setChunkedTransferEncoding(true);
    std::ostream* out = nullptr;
    try {
      out = &response.send();
    } catch (const std::exception& e) {
      logger().debug("could not send headers to %s: %s", request.clientAddress().toString(), std::string(e.what()));
    }
    // Runs even when the headers failed, so the route's cleanup and bookkeeping happen.
    SocketSink sink(out, socket);
    reply.stream(sink);
    return;
  }
  response.setContentLength64(static_cast<Poco::Int64>(reply.body.size()));
  response.sendBuffer(reply.body.data(), reply.body.size());
}

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  Handler(Router& router, ServerState& state) : router_(router), state_(state) {}

  void handleRequest(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response) override {
    // Admitted before the drain check; the token is held until the reply is written,
    // so the drain waits for the bytes to leave, not just for the route to return.
    ServerState::Admission admission = state_.try_admit();
    auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(&request);
    Poco::Net::StreamSocket* socket = impl != nullptr ? &impl->socket() : nullptr;
    try {
      const Reply reply = admission ? router_.handle(request, request.stream(), [socket] { return peer_closed(socket); })
                                    : router_.reject_draining(request);
      write_reply(reply, request, response, socket);
    } catch (const std::exception& e) {
      // Only writing can fail here (the router does not throw): the client went away.
      logger().debug("could not send a reply to %s: %s", request.clientAddress().toString(), std::string(e.what()));
    }
  }

 private:
  Router& router_;
  ServerState& state_;
};

}  // namespace

Poco::Net::HTTPRequestHandler* HandlerFactory::createRequestHandler(const Poco::Net::HTTPServerRequest&) {
  return new Handler(router_, state_);
}

}  // namespace memra::server
