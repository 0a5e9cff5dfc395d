// Test helper: one HTTP exchange with memra-host over loopback (Poco client).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace memra::server::testing {

struct HttpRequest {
  std::string method = "GET";
  std::string path = "/";
  std::optional<std::string> body;          // sent with Content-Length unless `chunked`
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  bool chunked = false;
  // Declare this Content-Length but send no body (tests the pre-read 413).
  std::optional<long long> declared_length;
};

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string header(const std::string& lower_name) const;
};

// Throws Poco::Exception on connection failure (e.g. refused).
HttpResponse http(int port, const HttpRequest& request, int timeout_ms = 20000);

inline HttpRequest get(std::string path, std::string bearer = "") {
  HttpRequest r;
  r.path = std::move(path);
  if (!bearer.empty()) r.headers["Authorization"] = "Bearer " + bearer;
  return r;
}

inline HttpRequest post(std::string path, std::string body, std::string bearer = "") {
  HttpRequest r;
  r.method = "POST";
  r.path = std::move(path);
  r.body = std::move(body);
  if (!bearer.empty()) r.headers["Authorization"] = "Bearer " + bearer;
  return r;
}

}  // namespace memra::server::testing
