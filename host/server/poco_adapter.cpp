#include "host/server/poco_adapter.hpp"

#include <Poco/Logger.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

namespace memra::server {
namespace {

void write_reply(const Reply& reply, const Poco::Net::HTTPServerRequest& request,
                 Poco::Net::HTTPServerResponse& response) {
  response.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(reply.status));
  response.setContentType(reply.content_type);
  for (const auto& [name, value] : reply.headers) response.set(name, value);
  if (reply.close_connection || !request.getKeepAlive()) response.setKeepAlive(false);
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
    try {
      const Reply reply = admission ? router_.handle(request, request.stream()) : router_.reject_draining(request);
      write_reply(reply, request, response);
    } catch (const std::exception& e) {
      // Only writing can fail here (the router does not throw): the client went away.
      Poco::Logger::get("memra-host").debug("could not send a reply to %s: %s",
                                            request.clientAddress().toString(), std::string(e.what()));
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
