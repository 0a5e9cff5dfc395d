// POST /v1/chat/completions and /v1/completions: validate, pick the model,
// build the prompts, check the context, admit the request for its tenant,
// submit its sequences to the model's scheduler, then answer with one JSON body
// or a stream of Server-Sent Events.
#include <Poco/Logger.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "host/server/admission.hpp"
#include "host/server/generation.hpp"
#include "host/server/chat_output.hpp"
#include "host/server/openai_format.hpp"
#include "host/server/output_constraint.hpp"
#include "host/server/prompt_builder.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/router.hpp"
#include "host/server/served_model.hpp"
#include "host/server/token_budget.hpp"

namespace memra::server {
namespace {

using namespace std::chrono_literals;

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

constexpr auto kPollInterval = 50ms;

Reply with_retry_after(Reply reply, std::int64_t seconds) {
  reply.add_header("Retry-After", std::to_string(std::max<std::int64_t>(1, seconds)));
  return reply;
}

engine::SamplingParams sampling_of(const CompletionRequest& r) {
  engine::SamplingParams p;
  p.temperature = r.temperature;
  p.top_p = r.top_p;
  if (r.top_p <= 0.0f) {  // top_p 0 keeps only the most likely token: greedy
    p.temperature = 0.0f;
    p.top_p = 1.0f;
  }
  p.top_k = r.top_k;
  p.min_p = r.min_p;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.repetition_penalty = r.repetition_penalty;
  if (r.seed) {
    p.seed = *r.seed;
  } else {
    std::random_device rd;  // no seed: a fresh one per request
    p.seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  return p;
}

// Everything a streamed answer needs after the route returned.
struct StreamJob {
  std::unique_ptr<GenerationRun> run;
  TenantAdmission::Ticket ticket;
  ResponseMeta meta;
  std::vector<std::string> echo;  // per prompt
  std::int64_t n = 1;
  bool include_usage = false;
  ServedModel* model = nullptr;
  Metrics* metrics = nullptr;
  std::string tenant;
  std::uint64_t request_id = 0;
  // Chat: each choice's text split into reasoning, content and tool calls.
  std::vector<ToolDef> tools;  // what output.tool_defs points to
  ChatOutputConfig output;
  std::vector<std::unique_ptr<ChatOutputParser>> parsers;
  std::vector<std::vector<std::size_t>> token_starts;  // per choice: where each token's text starts
};

UsageCounts usage_of(const ServedModel& model, const GenerationRun& run, const ChatOutputConfig* output = nullptr,
                     std::int64_t reasoning_tokens = 0) {
  UsageCounts u{run.prompt_tokens(), run.completion_tokens(), run.cached_tokens()};
  u.speculative = model.spec != "off";
  u.drafted = run.drafted_tokens();
  u.accepted = run.accepted_tokens();
  u.reasoning = output != nullptr && output->reasoning.has_value();
  u.reasoning_tokens = reasoning_tokens;
  return u;
}

// A choice's finish_reason as the client sees it: tool_calls when the answer called tools.
std::string client_finish(const std::string& engine_reason, std::size_t calls) {
  return calls > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

std::int64_t count_below(const std::vector<std::size_t>& starts, std::size_t bytes) {
  return static_cast<std::int64_t>(std::count_if(starts.begin(), starts.end(), [&](std::size_t s) { return s < bytes; }));
}

void record_end(Metrics& metrics, const ServedModel& model, const std::string& tenant, const GenerationRun& run,
                const std::vector<std::string>& finish_reasons) {
  metrics.add_tokens(model.alias, tenant, run.prompt_tokens(), run.completion_tokens(), run.cached_tokens());
  if (model.spec != "off") metrics.add_spec_tokens(model.alias, run.drafted_tokens(), run.accepted_tokens());
  for (const auto& f : finish_reasons) metrics.add_completion(model.alias, f);
}

void stream_answer(StreamJob& job, StreamSink& sink) {
  GenerationRun& run = *job.run;
  std::vector<std::string> finish(run.choices(), "cancelled");
  const bool chat = job.meta.kind == CompletionKind::chat;
  auto gone = [&] {
    run.cancel();
    record_end(*job.metrics, *job.model, job.tenant, run, finish);
    logger().information("request %s: the client closed the connection mid-stream after %s generated token(s); its "
                         "sequences are cancelled",
                         std::to_string(job.request_id), std::to_string(run.completion_tokens()));
  };
  for (std::size_t i = 0; i < run.choices(); ++i) {
    std::string first;
    if (chat) {
      first = chat_role_event(job.meta, i, job.include_usage);
    } else if (!job.echo.empty()) {
      ChoiceDelta empty;
      empty.index = i;
      first = delta_event(job.meta, empty, job.echo[i / static_cast<std::size_t>(job.n)], 0, job.include_usage);
    }
    if (!first.empty() && !sink.write(first)) return gone();
  }
  while (!run.done()) {
    const auto deltas = run.poll(kPollInterval);
    std::string out;
    for (const auto& d : deltas) {
      const std::size_t echo_bytes = job.echo.empty() ? 0 : job.echo[d.index / static_cast<std::size_t>(job.n)].size();
      if (d.finish_reason) finish[d.index] = *d.finish_reason;
      if (d.finish_reason && *d.finish_reason == "error") continue;  // reported once, below
      if (!chat) {
        out += delta_event(job.meta, d, "", echo_bytes, job.include_usage);
        continue;
      }
      ChatOutputParser& parser = *job.parsers[d.index];
      for (const auto& t : d.tokens) job.token_starts[d.index].push_back(t.text_start);
      ChatPieces pieces = parser.push(d.text);
      ChoiceDelta cd = d;
      if (d.finish_reason) {
        ChatPieces rest = parser.finish();
        pieces.reasoning += rest.reasoning;
        pieces.content += rest.content;
        pieces.tool_calls.insert(pieces.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
        cd.finish_reason = client_finish(*d.finish_reason, parser.calls());
      }
      cd.text = std::move(pieces.content);
      ChatDeltaExtras extras{std::move(pieces.reasoning), std::move(pieces.tool_calls)};
      out += delta_event(job.meta, cd, "", 0, job.include_usage, &extras);
    }
    if (!out.empty() && !sink.write(out)) return gone();
    if (out.empty() && sink.client_gone()) return gone();
  }
  record_end(*job.metrics, *job.model, job.tenant, run, finish);
  std::string tail;
  if (run.error() && run.aborted()) {
    logger().warning("request %s: stream cut by the server: %s", std::to_string(job.request_id), *run.error());
    tail += error_event(errors::shutting_down());
  } else if (run.error()) {
    logger().error("request %s: generation failed mid-stream: %s", std::to_string(job.request_id), *run.error());
    tail += error_event(errors::generation_failed(*run.error()));
  } else if (job.include_usage) {
    std::int64_t reasoning_tokens = 0;
    for (std::size_t i = 0; i < job.parsers.size(); ++i)
      reasoning_tokens += count_below(job.token_starts[i], job.parsers[i]->reasoning_bytes());
    tail += usage_event(job.meta, usage_of(*job.model, run, chat ? &job.output : nullptr, reasoning_tokens));
  }
  tail += kDoneEvent;
  sink.write(tail);
}

Reply complete(CompletionKind kind, const Router& router, RequestContext& ctx, const std::string& body) {
  Validation v = validate_completion_body(kind, body);
  if (v.error) return error_reply(*v.error);
  CompletionRequest& req = *v.request;
  ModelSet* models = router.config().models;
  if (models == nullptr || models->empty()) return error_reply(errors::model_not_loaded());
  ServedModel* model = models->find(req.model);
  if (model == nullptr) return error_reply(errors::model_not_found(req.model));

  for (const auto& b : req.logit_bias) {
    if (b.id >= model->vocab_size()) {
      return error_reply(errors::invalid_request(
          "invalid_value",
          "'logit_bias' names token " + std::to_string(b.id) + ", outside the vocabulary of '" + model->alias +
              "' (0 to " + std::to_string(model->vocab_size() - 1) + ")",
          std::string("logit_bias")));
    }
  }

  // Chat: how the answer is split (the model's thinking markers, its tool-call format).
  ChatOutputConfig output;
  ToolFormat tool_format = ToolFormat::none;
  if (kind == CompletionKind::chat && model->text.chat_template) {
    const std::string& source = model->text.chat_template->source();
    output.reasoning = reasoning_markers(source);
    if (!req.tools.empty() && req.tool_choice.mode != ToolChoiceMode::none) {
      tool_format = tool_format_for_template(source);
      if (tool_format == ToolFormat::none) tool_format = ToolFormat::hermes;
    }
    output.tools = tool_format;
    output.parallel_tool_calls = req.parallel_tool_calls;
    // A constrained output starts at once: a model that can think is asked not to (the
    // grammar has no room for the thinking), unless the request says otherwise.
    if (wants_constraint(req) && output.reasoning && !req.chat_template_kwargs.contains("enable_thinking") &&
        !req.reasoning_effort)
      req.chat_template_kwargs["enable_thinking"] = false;
  }

  BuiltPrompts built = build_prompts(*model, req);
  if (built.error) return error_reply(*built.error);
  if (output.reasoning) output.starts_in_reasoning = prompt_opens_reasoning(built.texts[0], *output.reasoning);
  if (output.starts_in_reasoning && wants_constraint(req)) {
    return error_reply(errors::invalid_request(
        "unsupported_parameter",
        "the chat template of '" + model->alias + "' opens the model's thinking in the prompt, and constrained outputs "
                                                  "(response_format, a required or named tool_choice) cannot follow "
                                                  "thinking yet",
        std::string(req.response_format.type != ResponseFormatType::text ? "response_format" : "tool_choice")));
  }
  OutputConstraint constraint = output_constraint(*model, req, tool_format);
  if (constraint.error) return error_reply(*constraint.error);

  // How many tokens: given, or the documented default rule (token_budget.hpp).
  TokenBudgetInput tb;
  tb.requested = req.max_tokens;
  for (const auto& p : built.prompts) tb.prompt_tokens.push_back(static_cast<std::int64_t>(p.size()));
  tb.n = req.n;
  tb.context = model->max_context();
  tb.default_max_tokens = router.config().default_max_tokens;
  if (ctx.key != nullptr) tb.tenant_kv_tokens = ctx.key->limits.max_kv_tokens;
  tb.prompt_param = kind == CompletionKind::chat ? "messages" : "prompt";
  tb.model = model->alias;
  const TokenBudget budget = token_budget(tb);
  if (budget.error) return error_reply(*budget.error);
  const std::int64_t max_tokens = budget.max_tokens;

  GenerationSpec spec;
  spec.prompts = std::move(built.prompts);
  spec.n = req.n;
  spec.sampling = sampling_of(req);
  spec.max_tokens = max_tokens;
  spec.stop = req.stop;
  spec.ignore_eos = req.ignore_eos;
  spec.logit_bias = req.logit_bias;
  spec.constraint = std::move(constraint.factory);
  spec.cache_namespace = model->alias + '\x1f' + ctx.tenant() + '\x1f' + req.cache_salt;
  if (ctx.key != nullptr) spec.priority = ctx.key->limits.priority;
  if (auto bad = engine::validate(spec.sampling)) {
    return error_reply(errors::invalid_request("invalid_value", *bad, std::nullopt));
  }

  // Tenant admission: worst-case KV tokens of every sequence of this request.
  const std::int64_t kv_tokens = budget.kv_tokens;
  Metrics& metrics = router.metrics();
  const std::string& tenant = ctx.tenant();
  TenantAdmission::Ticket ticket;
  if (router.config().admission != nullptr && ctx.key != nullptr) {
    const TenantLimits& limits = ctx.key->limits;
    auto admitted = router.config().admission->admit(tenant, limits, kv_tokens, ctx.client_gone);
    metrics.observe_queue_wait(model->alias, tenant, admitted.waited_seconds);
    const std::int64_t retry = (limits.queue_timeout_ms + 999) / 1000;
    switch (admitted.outcome) {
      case TenantAdmission::Outcome::admitted:
        ticket = std::move(admitted.ticket);
        break;
      case TenantAdmission::Outcome::too_large:
        metrics.add_rejection(tenant, "tenant_kv_budget");
        return error_reply(errors::kv_budget_exceeded(kv_tokens, limits.max_kv_tokens));
      case TenantAdmission::Outcome::queue_full:
        metrics.add_rejection(tenant, "tenant_queue_full");
        return with_retry_after(error_reply(errors::tenant_rate_limited(tenant, "its admission queue is full")), retry);
      case TenantAdmission::Outcome::timed_out:
        metrics.add_rejection(tenant, "tenant_queue_timeout");
        return with_retry_after(
            error_reply(errors::tenant_rate_limited(
                tenant, "no room within its queue_timeout_ms of " + std::to_string(limits.queue_timeout_ms) +
                            " ms (max_concurrent " + std::to_string(limits.max_concurrent) + ", max_kv_tokens " +
                            std::to_string(limits.max_kv_tokens) + ")")),
            retry);
      case TenantAdmission::Outcome::client_gone:
        return error_reply(errors::client_closed());
    }
  } else {
    metrics.observe_queue_wait(model->alias, tenant, 0.0);
  }

  auto started = GenerationRun::start(*model, spec);
  if (!started) {
    if (started.error().code == ErrorCode::conflict) {
      metrics.add_rejection(tenant, "device_full");
      return with_retry_after(error_reply(errors::server_overloaded("the scheduler's queue for '" + model->alias +
                                                                    "' is full: " + started.error().message)),
                              1);
    }
    return error_reply(errors::invalid_request("invalid_value", started.error().message, std::nullopt));
  }
  std::unique_ptr<GenerationRun> run = std::move(*started);
  // The device gate: wait until the scheduler admitted every sequence, so a refusal
  // is still an ordinary HTTP answer (nothing of the reply is sent yet).
  switch (run->wait_admitted(std::chrono::milliseconds(router.config().queue_timeout_ms), ctx.client_gone)) {
    case GenerationRun::Admission::admitted:
      break;
    case GenerationRun::Admission::timed_out:
      metrics.add_rejection(tenant, "device_queue_timeout");
      return with_retry_after(error_reply(errors::server_overloaded(
                                  "not admitted by the scheduler of '" + model->alias + "' within " +
                                  std::to_string(router.config().queue_timeout_ms) + " ms (memra-host --queue-timeout-ms)")),
                              1);
    case GenerationRun::Admission::client_gone:
      return error_reply(errors::client_closed());
  }
  const std::string alias = model->alias;
  run->on_first_token = [&metrics, alias](double s) { metrics.observe_ttft(alias, s); };
  run->on_token_gap = [&metrics, alias](double s) { metrics.observe_inter_token(alias, s); };

  ResponseMeta meta;
  meta.kind = kind;
  meta.id = random_id(kind == CompletionKind::chat ? "chatcmpl-" : "cmpl-");
  meta.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  meta.model = model->alias;
  meta.fingerprint = "memra-" + router.config().version;
  meta.logprobs = req.logprobs;
  meta.top_logprobs = req.top_logprobs;
  meta.tokenizer = model->text.tokenizer.get();
  std::vector<std::string> echo;
  if (req.echo) echo = built.texts;

  if (req.stream) {
    auto job = std::make_shared<StreamJob>();
    job->run = std::move(run);
    job->ticket = std::move(ticket);
    job->meta = std::move(meta);
    job->echo = std::move(echo);
    job->n = req.n;
    job->include_usage = req.include_usage;
    job->model = model;
    job->metrics = &metrics;
    job->tenant = tenant;
    job->request_id = ctx.request_id;
    if (kind == CompletionKind::chat) {
      job->tools = std::move(req.tools);
      job->output = output;
      job->output.tool_defs = &job->tools;
      for (std::size_t i = 0; i < job->run->choices(); ++i) job->parsers.push_back(std::make_unique<ChatOutputParser>(job->output));
      job->token_starts.resize(job->run->choices());
    }
    Reply reply;
    reply.status = 200;
    reply.content_type = "text/event-stream";
    reply.add_header("Cache-Control", "no-cache");
    reply.stream = [job](StreamSink& sink) {
      stream_answer(*job, sink);
      job->run.reset();  // cancel anything left and free the tenant's share now
      job->ticket.release();
    };
    return reply;
  }

  std::vector<ChoiceResult> results(run->choices());
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i].index = i;
    results[i].finish_reason = "cancelled";
    if (!echo.empty()) results[i].prefix = echo[i / static_cast<std::size_t>(req.n)];
  }
  std::vector<std::string> finish(run->choices(), "cancelled");
  while (!run->done()) {
    for (auto& d : run->poll(kPollInterval)) {
      auto& r = results[d.index];
      r.text += d.text;
      r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
      if (d.finish_reason) r.finish_reason = finish[d.index] = *d.finish_reason;
    }
    if (!run->done() && ctx.client_gone()) {
      run->cancel();
      record_end(metrics, *model, tenant, *run, finish);
      logger().information("request %s: the client closed the connection before the answer; its sequences are "
                           "cancelled",
                           std::to_string(ctx.request_id));
      return error_reply(errors::client_closed());
    }
  }
  record_end(metrics, *model, tenant, *run, finish);
  if (run->error() && run->aborted()) return error_reply(errors::shutting_down());
  if (run->error()) {
    logger().error("request %s: generation failed: %s", std::to_string(ctx.request_id), *run->error());
    return error_reply(errors::generation_failed(*run->error()));
  }
  std::int64_t reasoning_tokens = 0;
  if (kind == CompletionKind::chat) {
    output.tool_defs = &req.tools;
    for (auto& r : results) {
      ChatOutputParser parser(output);
      ChatPieces a = parser.push(r.text);
      ChatPieces b = parser.finish();
      r.reasoning = a.reasoning + b.reasoning;
      r.text = a.content + b.content;
      r.tool_calls = std::move(a.tool_calls);
      r.tool_calls.insert(r.tool_calls.end(), b.tool_calls.begin(), b.tool_calls.end());
      r.finish_reason = client_finish(r.finish_reason, r.tool_calls.size());
      for (const auto& t : r.tokens) reasoning_tokens += t.text_start < parser.reasoning_bytes() ? 1 : 0;
    }
  }
  Reply reply;
  reply.status = 200;
  reply.body = completion_body(meta, results, usage_of(*model, *run, kind == CompletionKind::chat ? &output : nullptr,
                                                       reasoning_tokens));
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
