#include "http_client.hpp"

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/String.h>

namespace memra::server::testing {

std::string HttpResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpResponse http(int port, const HttpRequest& request, int timeout_ms) {
  Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(port));
  session.setTimeout(Poco::Timespan(static_cast<long>(timeout_ms) * 1000));
  Poco::Net::HTTPRequest req(request.method, request.path, Poco::Net::HTTPMessage::HTTP_1_1);
  for (const auto& [name, value] : request.headers) req.set(name, value);
  const bool has_body = request.body || request.declared_length;
  if (has_body && !request.content_type.empty()) req.setContentType(request.content_type);
  if (request.declared_length) {
    req.setContentLength64(*request.declared_length);
  } else if (request.body && request.chunked) {
    req.setChunkedTransferEncoding(true);
  } else if (request.body) {
    req.setContentLength64(static_cast<Poco::Int64>(request.body->size()));
  }
  std::ostream& out = session.sendRequest(req);
  if (request.body && !request.declared_length) out << *request.body;

  Poco::Net::HTTPResponse res;
  std::istream& in = session.receiveResponse(res);
  HttpResponse response;
  response.status = static_cast<int>(res.getStatus());
  response.content_type = res.getContentType();
  for (const auto& [name, value] : res) response.headers[Poco::toLower(name)] = value;
  Poco::StreamCopier::copyToString(in, response.body);
  return response;
}

}  // namespace memra::server::testing
