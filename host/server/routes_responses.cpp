// POST /v1/responses: the OpenAI Responses API over the chat engine path. The
// body is translated into a chat request (responses_request.hpp), with the
// conversation of previous_response_id (this tenant's, from the bounded store) in
// front; the answer is a Response object or its event stream. A stored response
// keeps its whole conversation, so a chain of previous_response_ids needs only the
// last one. GET and DELETE /v1/responses/{id} read and remove a stored one.
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

  auto remember = [store, tenant, id = head.id, keep = req.store, conversation](const ChoiceResult& answer,
                                                                                 const std::string& response) mutable {
    if (store == nullptr || !keep) return;
    for (const auto& m : assistant_messages(answer)) conversation.push_back(m);
    store->put(tenant, id, conversation.dump(-1, ' ', false, json::error_handler_t::replace), response);
  };
  if (req.stream) return stream_reply(std::move(s), responses_stream(std::move(head), std::move(remember)));

  CollectedAnswer answer = collect_answer(*s, ctx, false);
  if (answer.error) return error_reply(*answer.error);
  Reply reply;
  reply.status = 200;
  reply.body = response_body(head, answer.results[0], answer.usage);
  remember(answer.results[0], reply.body.substr(0, reply.body.size() - 1));  // without the trailing newline
  return reply;
}

// OpenAI answers an id it does not hold (never stored, expired, deleted, another
// tenant's) with a 404.
ApiError response_not_found(const std::string& id) {
  ApiError e = errors::invalid_request("response_not_found", "Response with id '" + id + "' not found.", std::nullopt);
  e.status = 404;
  return e;
}

Reply retrieve(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string&) {
  ResponseStore* store = router.config().responses;
  std::optional<std::string> r = store ? store->response(ctx.tenant(), ctx.path_param) : std::nullopt;
  if (!r || r->empty()) return error_reply(response_not_found(ctx.path_param));
  Reply reply;
  reply.status = 200;
  reply.body = *r + "\n";
  return reply;
}

Reply remove(const Router& router, RequestContext& ctx, const Poco::Net::HTTPRequest&, const std::string&) {
  ResponseStore* store = router.config().responses;
  if (!store || !store->erase(ctx.tenant(), ctx.path_param)) return error_reply(response_not_found(ctx.path_param));
  Reply reply;
  reply.status = 200;
  reply.body = json({{"id", ctx.path_param}, {"object", "response"}, {"deleted", true}}).dump() + "\n";
  return reply;
}

}  // namespace

std::vector<Route> responses_routes() {
  return {{"/v1/responses", "POST", /*open=*/false, /*has_body=*/true, &responses},
          {"/v1/responses/", "GET", /*open=*/false, /*has_body=*/false, &retrieve, /*anthropic_errors=*/false, /*path_param=*/true},
          {"/v1/responses/", "DELETE", /*open=*/false, /*has_body=*/false, &remove, /*anthropic_errors=*/false, /*path_param=*/true}};
}

}  // namespace memra::server
