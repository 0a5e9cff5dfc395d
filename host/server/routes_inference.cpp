// POST /v1/chat/completions and /v1/completions: validate, pick the model,
// build the prompts, check the context, admit the request for its tenant,
// submit its sequences to the model's scheduler, then answer with one JSON body
// or a stream of Server-Sent Events.
#include "host/server/completion_pipeline.hpp"
#include "host/server/openai_format.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/router.hpp"

namespace memra::server {
namespace {

// The OpenAI chat.completion.chunk / text_completion event stream.
class OpenAiStream final : public StreamFormat {
 public:
  OpenAiStream(bool include_usage, std::int64_t n, bool echo) : include_usage_(include_usage), n_(n), echo_(echo) {}

  std::string open(const StartedCompletion& s) override {
    meta_ = s.meta;
    if (echo_) echo_texts_ = s.prompt_texts;
    std::string out;
    for (std::size_t i = 0; i < s.run->choices(); ++i) {
      if (meta_.kind == CompletionKind::chat) {
        out += chat_role_event(meta_, i, include_usage_);
      } else if (echo_) {
        ChoiceDelta empty;
        empty.index = i;
        out += delta_event(meta_, empty, echo_texts_[i / static_cast<std::size_t>(n_)], 0, include_usage_);
      }
    }
    return out;
  }
  std::string news(const ChoiceDelta& d, const ChatPieces* pieces, const std::optional<std::string>& finish) override {
    if (pieces == nullptr) {
      const std::size_t echo_bytes = echo_ ? echo_texts_[d.index / static_cast<std::size_t>(n_)].size() : 0;
      return delta_event(meta_, d, "", echo_bytes, include_usage_);
    }
    ChoiceDelta cd = d;
    cd.finish_reason = finish;
    ChatDeltaExtras extras{pieces->reasoning, pieces->tool_calls};
    return delta_event(meta_, cd, "", 0, include_usage_, &extras);
  }
  std::string close(const UsageCounts& usage) override {
    return (include_usage_ ? usage_event(meta_, usage) : std::string()) + kDoneEvent;
  }
  std::string failed(const ApiError& error) override { return error_event(error) + kDoneEvent; }

 private:
  bool include_usage_;
  std::int64_t n_;
  bool echo_;
  ResponseMeta meta_;
  std::vector<std::string> echo_texts_;
};

Reply complete(CompletionKind kind, const Router& router, RequestContext& ctx, const std::string& body) {
  Validation v = validate_completion_body(kind, body);
  if (v.error) return error_reply(*v.error);
  const bool stream = v.request->stream, include_usage = v.request->include_usage, echo = v.request->echo;
  const std::int64_t n = v.request->n;
  StartResult started = start_completion(router, ctx, std::move(*v.request), kind == CompletionKind::chat ? "chatcmpl-" : "cmpl-");
  if (started.refusal) return refusal_reply(*started.refusal);
  std::unique_ptr<StartedCompletion> s = std::move(started.started);
  if (stream) return stream_reply(std::move(s), std::make_unique<OpenAiStream>(include_usage, n, echo));
  CollectedAnswer answer = collect_answer(*s, ctx, echo);
  if (answer.error) return error_reply(*answer.error);
  Reply reply;
  reply.status = 200;
  reply.body = completion_body(s->meta, answer.results, answer.usage);
  return reply;
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
