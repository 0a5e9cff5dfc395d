// POST /v1/messages: the Anthropic Messages API over the chat engine path. The
// body is translated into a chat request (messages_request.hpp); the answer is a
// Message or its event stream; every error is in Anthropic's shape (the router
// restyles its own refusals for this route too: Route::anthropic_errors).
// POST /v1/messages/count_tokens: the prompt tokens the same body would cost.
#include <nlohmann/json.hpp>

#include "host/json/bounded_parse.hpp"

#include "host/server/completion_pipeline.hpp"
#include "host/server/messages_format.hpp"
#include "host/server/messages_request.hpp"
#include "host/server/prompt_builder.hpp"
#include "host/server/router.hpp"

namespace memra::server {
namespace {

Reply messages(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string& body) {
  Parsed<MessagesRequest> parsed = parse_messages_body(body);
  if (parsed.error) return anthropic_error_reply(*parsed.error);
  const bool stream = parsed.value->stream;
  StartResult started = start_completion(router, ctx, std::move(parsed.value->chat), "msg_");
  if (started.refusal) return anthropic_error_reply(started.refusal->error, started.refusal->retry_after);
  std::unique_ptr<StartedCompletion> s = std::move(started.started);
  if (stream) return stream_reply(std::move(s), messages_stream());
  CollectedAnswer answer = collect_answer(*s, ctx, false);
  if (answer.error) return anthropic_error_reply(*answer.error);
  Reply reply;
  reply.status = 200;
  reply.body = message_body(s->meta, answer.results[0], answer.usage);
  return reply;
}

// Anthropic's count_tokens takes a Messages body without max_tokens: the count is the
// prompt's (the template rendered with the system prompt, the messages and the tools).
Reply count_tokens(const Router& router, RequestContext&, const Poco::Net::HTTPRequest&, const std::string& body) {
  std::string checked = body;
  // A body past the limits is passed on as it is, for the checker to refuse.
  if (auto j = jsonio::parse(body); j && j->is_object() && !j->contains("max_tokens")) {
    (*j)["max_tokens"] = 1;  // the Messages checker requires it; nothing is generated here
    checked = j->dump();
  }
  Parsed<MessagesRequest> parsed = parse_messages_body(checked);
  if (parsed.error) return anthropic_error_reply(*parsed.error);
  const CompletionRequest& req = parsed.value->chat;
  ModelSet* models = router.config().models;
  if (models == nullptr || models->empty()) return anthropic_error_reply(errors::model_not_loaded());
  const ServedModel* model = models->find(req.model);
  if (model == nullptr) return anthropic_error_reply(errors::model_not_found(req.model));
  BuiltPrompts built = build_prompts(*model, req);
  if (built.error) return anthropic_error_reply(*built.error);
  Reply reply;
  reply.status = 200;
  reply.body = nlohmann::ordered_json({{"input_tokens", built.prompts[0].size()}}).dump() + "\n";
  return reply;
}

}  // namespace

std::vector<Route> messages_routes() {
  return {{"/v1/messages", "POST", /*open=*/false, /*has_body=*/true, &messages, /*anthropic_errors=*/true},
          {"/v1/messages/count_tokens", "POST", /*open=*/false, /*has_body=*/true, &count_tokens, /*anthropic_errors=*/true}};
}

}  // namespace memra::server
