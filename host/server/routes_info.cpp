// GET /health, /ready, /v1/models, /metrics.
#include <nlohmann/json.hpp>

#include "host/server/router.hpp"

namespace memra::server {
namespace {

using nlohmann::json;

Reply health(const Router&, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  return json_reply(200, R"({"status":"ok"})");
}

// Ready means: a model is loaded and the engine runs. Neither exists in this
// build, so this is always 503 with the reason (OpenAI error shape plus "status").
Reply ready(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  ApiError error = router.config().models.empty()
                       ? errors::not_ready("model_not_loaded",
                                           "no model is loaded; start memra-host with --model [ALIAS=]PATH "
                                           "(loading a model is not available in this build yet)")
                       : errors::not_ready("engine_unavailable", "the inference engine is not available in this build yet");
  json body = json::parse(error_body(error));
  body["status"] = "not_ready";
  return json_reply(503, body.dump());
}

Reply models(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  json data = json::array();
  for (const auto& alias : router.config().models) {
    data.push_back({{"id", alias}, {"object", "model"}, {"created", 0}, {"owned_by", "memra"}});
  }
  return json_reply(200, json{{"object", "list"}, {"data", data}}.dump());
}

Reply metrics(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string&) {
  Reply reply;
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  reply.body = router.metrics().render();
  return reply;
}

}  // namespace

std::vector<Route> info_routes() {
  return {
      {"/health", "GET", /*open=*/true, /*has_body=*/false, &health},
      {"/ready", "GET", /*open=*/true, /*has_body=*/false, &ready},
      {"/v1/models", "GET", /*open=*/false, /*has_body=*/false, &models},
      {"/metrics", "GET", /*open=*/false, /*has_body=*/false, &metrics},
  };
}

}  // namespace memra::server
