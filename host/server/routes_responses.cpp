// POST /v1/responses: the OpenAI Responses API over the chat engine path. The
// body is translated into a chat request (responses_request.hpp), with the
// conversation of previous_response_id (this tenant's, from the bounded store) in
// front; the answer is a Response object or its event stream. A stored response
// keeps its whole conversation, so a chain of previous_response_ids needs only the
// last one.
#include <chrono>

#include "host/server/completion_pipeline.hpp"
#include "host/server/response_store.hpp"
#include "host/server/responses_format.hpp"
#include "host/server/responses_request.hpp"
#include "host/server/router.hpp"

namespace memra::server {
namespace {

using json = nlohmann::ordered_json;

ApiError previous_not_found(const std::string& id) {
  // OpenAI answers an unknown (or expired, or not stored) id with this 400.
  return errors::invalid_request("previous_response_not_found", "Previous response with id '" + id + "' not found.",
                                 std::string("previous_response_id"));
}

Reply responses(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string& body) {
  Parsed<ResponsesRequest> parsed = parse_responses_body(body);
  if (parsed.error) return error_reply(*parsed.error);
  ResponsesRequest& req = *parsed.value;
  ResponseStore* store = router.config().responses;
  const std::string tenant = ctx.tenant();

  json history = json::array();
  if (req.previous_response_id) {
    std::optional<std::string> stored = store ? store->get(tenant, *req.previous_response_id) : std::nullopt;
    if (!stored) return error_reply(previous_not_found(*req.previous_response_id));
    history = json::parse(*stored);
  }
  Validation v = responses_chat_request(req, history);
  if (v.error) return error_reply(*v.error);
  // The conversation so far, without the instructions (they do not carry over).
  json conversation = history;
  for (const auto& m : req.chat["messages"]) conversation.push_back(m);

  StartResult started = start_completion(router, ctx, std::move(*v.request), "resp_");
  if (started.refusal) return refusal_reply(*started.refusal);
  std::unique_ptr<StartedCompletion> s = std::move(started.started);
  ResponseHead head{s->meta.id, s->meta.created, s->meta.model, req.echo};

  auto remember = [store, tenant, id = head.id, keep = req.store, conversation](const ChoiceResult& answer) mutable {
    if (store == nullptr || !keep) return;
    for (const auto& m : assistant_messages(answer)) conversation.push_back(m);
    store->put(tenant, id, conversation.dump(-1, ' ', false, json::error_handler_t::replace));
  };
  if (req.stream) return stream_reply(std::move(s), responses_stream(std::move(head), std::move(remember)));

  CollectedAnswer answer = collect_answer(*s, ctx, false);
  if (answer.error) return error_reply(*answer.error);
  remember(answer.results[0]);
  Reply reply;
  reply.status = 200;
  reply.body = response_body(head, answer.results[0], answer.usage);
  return reply;
}

}  // namespace

std::vector<Route> responses_routes() {
  return {{"/v1/responses", "POST", /*open=*/false, /*has_body=*/true, &responses}};
}

}  // namespace memra::server
