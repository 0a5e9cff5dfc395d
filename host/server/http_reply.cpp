#include "host/server/http_reply.hpp"

#include <Poco/String.h>

namespace memra::server {

std::string Reply::header(const std::string& name) const {
  for (const auto& [key, value] : headers) {
    if (Poco::icompare(key, name) == 0) return value;
  }
  return {};
}

Reply json_reply(int status, std::string json_body) {
  Reply reply;
  reply.status = status;
  reply.content_type = "application/json";
  reply.body = std::move(json_body);
  reply.body += '\n';
  return reply;
}

Reply error_reply(const ApiError& error) {
  Reply reply = json_reply(error.status, error_body(error));
  reply.error = error;
  return reply;
}

}  // namespace memra::server
