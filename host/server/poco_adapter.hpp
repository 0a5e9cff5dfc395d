// Plugs the Router into Poco::Net::HTTPServer: admission against the drain,
// then the router, then writing the Reply.
#pragma once

#include <Poco/Net/HTTPRequestHandlerFactory.h>

#include "host/server/router.hpp"
#include "host/server/server_state.hpp"

namespace memra::server {

class HandlerFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  HandlerFactory(Router& router, ServerState& state) : router_(router), state_(state) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(const Poco::Net::HTTPServerRequest& request) override;

 private:
  Router& router_;
  ServerState& state_;
};

}  // namespace memra::server
