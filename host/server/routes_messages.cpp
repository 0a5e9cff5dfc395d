// POST /v1/messages: the Anthropic Messages API over the chat engine path. The
// body is translated into a chat request (messages_request.hpp); the answer is a
// Message or its event stream; every error is in Anthropic's shape (the router
// restyles its own refusals for this route too: Route::anthropic_errors).
#include "host/server/completion_pipeline.hpp"
#include "host/server/messages_format.hpp"
#include "host/server/messages_request.hpp"
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

}  // namespace

std::vector<Route> messages_routes() {
  return {{"/v1/messages", "POST", /*open=*/false, /*has_body=*/true, &messages, /*anthropic_errors=*/true}};
}

}  // namespace memra::server
