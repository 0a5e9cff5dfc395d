// The one engine path every generating route shares (/v1/chat/completions,
// /v1/completions, /v1/responses, /v1/messages): a validated CompletionRequest is
// checked against its model, rendered, constrained, budgeted, admitted for its
// tenant and submitted; the answer is then collected whole, or streamed through a
// StreamFormat that writes the route's own wire format. Each API only translates
// its request into a CompletionRequest and renders what comes back.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/server/admission.hpp"
#include "host/server/api_error.hpp"
#include "host/server/chat_output.hpp"
#include "host/server/generation.hpp"
#include "host/server/http_reply.hpp"
#include "host/server/openai_format.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/router.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {

// A request refused before anything was generated.
struct Refusal {
  ApiError error;
  std::optional<std::int64_t> retry_after;  // seconds, for 429/503
};

// A generation admitted and running, with what its answer's rendering needs.
struct StartedCompletion {
  std::unique_ptr<GenerationRun> run;
  TenantAdmission::Ticket ticket;
  ServedModel* model = nullptr;
  Metrics* metrics = nullptr;
  std::string tenant;
  std::uint64_t request_id = 0;
  ResponseMeta meta;
  std::vector<std::string> prompt_texts;  // each prompt as rendered
  std::vector<ToolDef> tools;             // chat: the request's tools (output.tool_defs points here)
  ChatOutputConfig output;                // chat: how an answer splits into reasoning, content, calls
  std::int64_t max_tokens = 0;            // the budget the run got
};

struct StartResult {
  std::unique_ptr<StartedCompletion> started;  // set on success
  std::optional<Refusal> refusal;              // set otherwise
};

// Tenant admission for a request needing `kv_tokens` of KV (the key's limits; none when
// auth or admission is off): sets `ticket`, or returns the 429/400 refusal (counted in
// the metrics). Every route that runs the engine goes through it.
std::optional<Refusal> admit_tenant(const Router& router, RequestContext& ctx, const std::string& model_alias,
                                    std::int64_t kv_tokens, TenantAdmission::Ticket& ticket);

// Runs every check from the model on (see docs/SERVING.md, "Order of checks") and
// starts the generation. `id_prefix` names the answer's id ("chatcmpl-", "resp_", "msg_").
StartResult start_completion(const Router& router, RequestContext& ctx, CompletionRequest req, const char* id_prefix);

// A whole answer: each choice's text (chat: split into reasoning, content and tool calls).
struct CollectedAnswer {
  std::vector<ChoiceResult> results;
  UsageCounts usage;
  std::optional<ApiError> error;  // the run failed, was cut, or the client left
};
CollectedAnswer collect_answer(StartedCompletion& s, RequestContext& ctx, bool echo);

// What a streamed answer's wire format writes at each point; the driver owns the run,
// the chat splitting, metrics, cancellation and the error path.
class StreamFormat {
 public:
  virtual ~StreamFormat() = default;
  // Before the first token.
  virtual std::string open(const StartedCompletion& s) = 0;
  // One choice's news. `pieces`: chat only, the split of delta.text (delta.text itself is
  // then the content part); `finish`: set once, with the client's finish reason (tool_calls
  // when the answer called tools).
  virtual std::string news(const ChoiceDelta& delta, const ChatPieces* pieces, const std::optional<std::string>& finish) = 0;
  // The answer ended normally.
  virtual std::string close(const UsageCounts& usage) = 0;
  // The answer ended in an error after the stream began.
  virtual std::string failed(const ApiError& error) = 0;
};

// The 200 streamed reply that drives `s` through `format` (text/event-stream).
Reply stream_reply(std::unique_ptr<StartedCompletion> s, std::unique_ptr<StreamFormat> format);

// The OpenAI error reply of a refusal (with Retry-After when it has one).
Reply refusal_reply(const Refusal& refusal);

// A choice's finish_reason as OpenAI reports it: tool_calls when the answer called tools.
std::string client_finish(const std::string& engine_reason, std::size_t calls);

}  // namespace memra::server
