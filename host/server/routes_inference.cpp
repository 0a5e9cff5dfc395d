// POST /v1/chat/completions and /v1/completions. The engine does not exist
// yet: a well-formed request ends in 503 model_not_loaded (or 404
// model_not_found once models can be loaded) after every client-side check.
#include <Poco/Logger.h>

#include <algorithm>

#include "host/server/request_validation.hpp"
#include "host/server/router.hpp"

namespace memra::server {
namespace {

Reply complete(CompletionKind kind, const Router& router, RequestContext& ctx, const std::string& body) {
  Validation v = validate_completion_body(kind, body);
  if (v.error) return error_reply(*v.error);
  const auto& models = router.config().models;
  if (models.empty()) return error_reply(errors::model_not_loaded());
  if (std::find(models.begin(), models.end(), v.request->model) == models.end()) {
    return error_reply(errors::model_not_found(v.request->model));
  }
  // The engine (tokenizer, scheduler, forward pass) is a later issue.
  if (ctx.key != nullptr) {
    Poco::Logger::get("memra-host").debug("request %s: tenant %s asked for %s", std::to_string(ctx.request_id),
                                          ctx.key->tenant, v.request->model);
  }
  return error_reply(errors::engine_unavailable(v.request->model));
}

Reply chat(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string& body) {
  return complete(CompletionKind::chat, router, ctx, body);
}

Reply text(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string& body) {
  return complete(CompletionKind::text, router, ctx, body);
}

}  // namespace

std::vector<Route> inference_routes() {
  return {
      {"/v1/chat/completions", "POST", /*open=*/false, /*has_body=*/true, &chat},
      {"/v1/completions", "POST", /*open=*/false, /*has_body=*/true, &text},
  };
}

}  // namespace memra::server
