// Test-only routes, registered only with --enable-test-routes (never in
// production): POST /debug/sleep?ms=N holds a request in flight so tests can
// exercise the drain; GET /debug/throw exercises the 500 path.
#include <Poco/NumberParser.h>
#include <Poco/URI.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "host/server/router.hpp"

namespace memra::server {
namespace {

constexpr int kMaxSleepMs = 60000;

Reply sleep(const Router&, RequestContext&, const Poco::Net::HTTPRequest& request, const std::string&) {
  int ms = -1;
  for (const auto& [name, value] : Poco::URI(request.getURI()).getQueryParameters()) {
    if (name == "ms" && !Poco::NumberParser::tryParse(value, ms)) ms = -1;
  }
  if (ms < 0 || ms > kMaxSleepMs) {
    return error_reply(errors::invalid_request(
        "invalid_value", "query parameter 'ms' must be an integer from 0 to " + std::to_string(kMaxSleepMs), "ms"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return json_reply(200, R"({"slept_ms":)" + std::to_string(ms) + "}");
}

Reply throw_error(const Router&, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  throw std::runtime_error("GET /debug/throw always throws (test route)");
}

}  // namespace

std::vector<Route> debug_routes() {
  return {
      {"/debug/sleep", "POST", /*open=*/false, /*has_body=*/false, &sleep},
      {"/debug/throw", "GET", /*open=*/false, /*has_body=*/false, &throw_error},
  };
}

}  // namespace memra::server
