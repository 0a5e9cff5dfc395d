#include "host/server/completion_pipeline.hpp"

#include <Poco/Logger.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "host/server/output_constraint.hpp"
#include "host/server/prompt_builder.hpp"
#include "host/server/token_budget.hpp"

namespace memra::server {
namespace {

using namespace std::chrono_literals;

Poco::Logger& logger() { return Poco::Logger::get("memra-host"); }

constexpr auto kPollInterval = 50ms;

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

UsageCounts usage_of(const StartedCompletion& s, std::int64_t reasoning_tokens) {
  const GenerationRun& run = *s.run;
  UsageCounts u{run.prompt_tokens(), run.completion_tokens(), run.cached_tokens()};
  u.cache_written = run.cache_written_tokens();
  u.speculative = s.model->spec != "off";
  u.drafted = run.drafted_tokens();
  u.accepted = run.accepted_tokens();
  u.reasoning = s.meta.kind == CompletionKind::chat && s.output.reasoning.has_value();
  u.reasoning_tokens = reasoning_tokens;
  return u;
}

std::int64_t count_below(const std::vector<std::size_t>& starts, std::size_t bytes) {
  return static_cast<std::int64_t>(std::count_if(starts.begin(), starts.end(), [&](std::size_t s) { return s < bytes; }));
}

void record_end(const StartedCompletion& s, const std::vector<std::string>& finish_reasons) {
  const GenerationRun& run = *s.run;
  s.metrics->add_tokens(s.model->alias, s.tenant, run.prompt_tokens(), run.completion_tokens(), run.cached_tokens());
  if (s.model->spec != "off") s.metrics->add_spec_tokens(s.model->alias, run.drafted_tokens(), run.accepted_tokens());
  for (const auto& f : finish_reasons) s.metrics->add_completion(s.model->alias, f);
}

Refusal refuse(ApiError e, std::optional<std::int64_t> retry = std::nullopt) { return Refusal{std::move(e), retry}; }

StartResult refused(ApiError e, std::optional<std::int64_t> retry = std::nullopt) {
  StartResult r;
  r.refusal = refuse(std::move(e), retry);
  return r;
}

// Drives a streamed answer: polls the run, splits chat text, hands each piece to the format.
void drive_stream(StartedCompletion& s, StreamFormat& format, StreamSink& sink) {
  GenerationRun& run = *s.run;
  std::vector<std::string> finish(run.choices(), "cancelled");
  const bool chat = s.meta.kind == CompletionKind::chat;
  std::vector<std::unique_ptr<ChatOutputParser>> parsers;
  std::vector<std::vector<std::size_t>> token_starts(run.choices());  // per choice: where each token's text starts
  if (chat)
    for (std::size_t i = 0; i < run.choices(); ++i) parsers.push_back(std::make_unique<ChatOutputParser>(s.output));
  auto gone = [&] {
    run.cancel();
    record_end(s, finish);
    logger().information("request %s: the client closed the connection mid-stream after %s generated token(s); its "
                         "sequences are cancelled",
                         std::to_string(s.request_id), std::to_string(run.completion_tokens()));
  };
  if (const std::string first = format.open(s); !first.empty() && !sink.write(first)) return gone();
  while (!run.done()) {
    const auto deltas = run.poll(kPollInterval);
    std::string out;
    for (const auto& d : deltas) {
      if (d.finish_reason) finish[d.index] = *d.finish_reason;
      if (d.finish_reason && *d.finish_reason == "error") continue;  // reported once, below
      if (!chat) {
        out += format.news(d, nullptr, d.finish_reason);
        continue;
      }
      ChatOutputParser& parser = *parsers[d.index];
      for (const auto& t : d.tokens) token_starts[d.index].push_back(t.text_start);
      ChatPieces pieces = parser.push(d.text);
      std::optional<std::string> client;
      if (d.finish_reason) {
        ChatPieces rest = parser.finish();
        pieces.reasoning += rest.reasoning;
        pieces.content += rest.content;
        pieces.tool_calls.insert(pieces.tool_calls.end(), rest.tool_calls.begin(), rest.tool_calls.end());
        client = client_finish(*d.finish_reason, parser.calls());
      }
      ChoiceDelta cd = d;
      cd.text = pieces.content;
      out += format.news(cd, &pieces, client);
    }
    if (!out.empty() && !sink.write(out)) return gone();
    if (out.empty() && sink.client_gone()) return gone();
  }
  record_end(s, finish);
  std::string tail;
  if (run.error() && run.aborted()) {
    logger().warning("request %s: stream cut by the server: %s", std::to_string(s.request_id), *run.error());
    tail = format.failed(errors::shutting_down());
  } else if (run.error()) {
    logger().error("request %s: generation failed mid-stream: %s", std::to_string(s.request_id), *run.error());
    tail = format.failed(errors::generation_failed(*run.error()));
  } else {
    std::int64_t reasoning_tokens = 0;
    for (std::size_t i = 0; i < parsers.size(); ++i) reasoning_tokens += count_below(token_starts[i], parsers[i]->reasoning_bytes());
    tail = format.close(usage_of(s, reasoning_tokens));
  }
  if (!tail.empty()) sink.write(tail);
}

}  // namespace

std::string client_finish(const std::string& engine_reason, std::size_t calls) {
  return calls > 0 && engine_reason == "stop" ? "tool_calls" : engine_reason;
}

Reply refusal_reply(const Refusal& refusal) {
  Reply reply = error_reply(refusal.error);
  if (refusal.retry_after) reply.add_header("Retry-After", std::to_string(std::max<std::int64_t>(1, *refusal.retry_after)));
  return reply;
}

std::optional<Refusal> admit_tenant(const Router& router, RequestContext& ctx, const std::string& model_alias,
                                    std::int64_t kv_tokens, TenantAdmission::Ticket& ticket) {
  Metrics& metrics = router.metrics();
  const std::string& tenant = ctx.tenant();
  if (router.config().admission == nullptr || ctx.key == nullptr) {
    metrics.observe_queue_wait(model_alias, tenant, 0.0);
    return std::nullopt;
  }
  const TenantLimits& limits = ctx.key->limits;
  auto admitted = router.config().admission->admit(tenant, limits, kv_tokens, ctx.client_gone);
  metrics.observe_queue_wait(model_alias, tenant, admitted.waited_seconds);
  const std::int64_t retry = (limits.queue_timeout_ms + 999) / 1000;
  switch (admitted.outcome) {
    case TenantAdmission::Outcome::admitted:
      ticket = std::move(admitted.ticket);
      return std::nullopt;
    case TenantAdmission::Outcome::too_large:
      metrics.add_rejection(tenant, "tenant_kv_budget");
      return refuse(errors::kv_budget_exceeded(kv_tokens, limits.max_kv_tokens));
    case TenantAdmission::Outcome::queue_full:
      metrics.add_rejection(tenant, "tenant_queue_full");
      return refuse(errors::tenant_rate_limited(tenant, "its admission queue is full"), retry);
    case TenantAdmission::Outcome::timed_out:
      metrics.add_rejection(tenant, "tenant_queue_timeout");
      return refuse(errors::tenant_rate_limited(
                        tenant, "no room within its queue_timeout_ms of " + std::to_string(limits.queue_timeout_ms) +
                                    " ms (max_concurrent " + std::to_string(limits.max_concurrent) + ", max_kv_tokens " +
                                    std::to_string(limits.max_kv_tokens) + ")"),
                    retry);
    case TenantAdmission::Outcome::client_gone:
      break;
  }
  return refuse(errors::client_closed());
}

StartResult start_completion(const Router& router, RequestContext& ctx, CompletionRequest req, const char* id_prefix) {
  const CompletionKind kind = req.kind;
  ModelSet* models = router.config().models;
  if (models == nullptr || models->empty()) return refused(errors::model_not_loaded());
  ServedModel* model = models->find(req.model);
  if (model == nullptr) return refused(errors::model_not_found(req.model));

  for (const auto& b : req.logit_bias) {
    if (b.id >= model->vocab_size()) {
      return refused(errors::invalid_request(
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
    output.forced_tool_call = tool_format != ToolFormat::none && (req.tool_choice.mode == ToolChoiceMode::required ||
                                                                   req.tool_choice.mode == ToolChoiceMode::named);
    // A constrained output is asked not to think by default (a model that can switch its
    // thinking off answers at once), unless the request says otherwise (enable_thinking,
    // reasoning_effort, thinking_token_budget); when it thinks, the grammar waits for the
    // thinking to close.
    if (wants_constraint(req) && output.reasoning && !req.chat_template_kwargs.contains("enable_thinking") &&
        !req.reasoning_effort && !req.thinking_token_budget)
      req.chat_template_kwargs["enable_thinking"] = false;
  }

  BuiltPrompts built = build_prompts(*model, req);
  if (built.error) return refused(*built.error);
  // Where the thinking stands once the prompt is read: opened by the template (the model
  // thinks first), closed by it (enable_thinking false: the model answers at once), or up to
  // the model. A constraint waits for the thinking to close.
  ThinkingGate thinking;
  if (output.reasoning) {
    output.starts_in_reasoning = prompt_opens_reasoning(built.texts[0], *output.reasoning);
    thinking.markers = output.reasoning;
    thinking.starts_inside = output.starts_in_reasoning;
    thinking.may_open = !output.starts_in_reasoning && !prompt_closes_reasoning(built.texts[0], *output.reasoning);
    thinking.budget = req.thinking_token_budget;
  }
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
  if (budget.error) return refused(*budget.error);

  GenerationSpec spec;
  spec.prompts = std::move(built.prompts);
  spec.n = req.n;
  spec.sampling = sampling_of(req);
  spec.max_tokens = budget.max_tokens;
  spec.stop = req.stop;
  spec.ignore_eos = req.ignore_eos;
  spec.logit_bias = req.logit_bias;
  spec.cache_namespace = model->alias + '\x1f' + ctx.tenant() + '\x1f' + req.cache_salt;
  if (ctx.key != nullptr) spec.priority = ctx.key->limits.priority;
  if (auto bad = engine::validate(spec.sampling)) return refused(errors::invalid_request("invalid_value", *bad, std::nullopt));

  // Tenant admission: worst-case KV tokens of every sequence of this request.
  Metrics& metrics = router.metrics();
  const std::string& tenant = ctx.tenant();
  TenantAdmission::Ticket ticket;
  if (std::optional<Refusal> no = admit_tenant(router, ctx, model->alias, budget.kv_tokens, ticket))
    return StartResult{nullptr, std::move(no)};

  // The grammar is compiled once the tenant is admitted: its time and memory (bounded per
  // request: kMaxGrammarElements) count against the tenant's max_concurrent.
  OutputConstraint constraint = output_constraint(*model, req, tool_format, thinking);
  if (constraint.error) return refused(*constraint.error);
  spec.constraint = std::move(constraint.factory);

  auto started = GenerationRun::start(*model, spec);
  if (!started) {
    if (started.error().code == ErrorCode::conflict) {
      metrics.add_rejection(tenant, "device_full");
      return refused(errors::server_overloaded("the scheduler's queue for '" + model->alias + "' is full: " +
                                               started.error().message),
                     1);
    }
    return refused(errors::invalid_request("invalid_value", started.error().message, std::nullopt));
  }
  std::unique_ptr<GenerationRun> run = std::move(*started);
  // The device gate: wait until the scheduler admitted every sequence, so a refusal
  // is still an ordinary HTTP answer (nothing of the reply is sent yet).
  switch (run->wait_admitted(std::chrono::milliseconds(router.config().queue_timeout_ms), ctx.client_gone)) {
    case GenerationRun::Admission::admitted:
      break;
    case GenerationRun::Admission::timed_out:
      metrics.add_rejection(tenant, "device_queue_timeout");
      return refused(errors::server_overloaded("not admitted by the scheduler of '" + model->alias + "' within " +
                                               std::to_string(router.config().queue_timeout_ms) +
                                               " ms (memra-host --queue-timeout-ms): " + model->load_summary()),
                     1);
    case GenerationRun::Admission::client_gone:
      return refused(errors::client_closed());
  }
  const std::string alias = model->alias;
  run->on_first_token = [&metrics, alias](double sec) { metrics.observe_ttft(alias, sec); };
  run->on_token_gap = [&metrics, alias](double sec) { metrics.observe_inter_token(alias, sec); };

  auto s = std::make_unique<StartedCompletion>();
  s->run = std::move(run);
  s->ticket = std::move(ticket);
  s->model = model;
  s->metrics = &metrics;
  s->tenant = tenant;
  s->request_id = ctx.request_id;
  s->meta.kind = kind;
  s->meta.id = random_id(id_prefix);
  s->meta.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  s->meta.model = model->alias;
  s->meta.fingerprint = "memra-" + router.config().version;
  s->meta.logprobs = req.logprobs;
  s->meta.top_logprobs = req.top_logprobs;
  s->meta.tokenizer = model->text.tokenizer.get();
  s->prompt_texts = std::move(built.texts);
  s->tools = std::move(req.tools);
  s->output = output;
  s->output.tool_defs = &s->tools;
  s->max_tokens = budget.max_tokens;
  StartResult out;
  out.started = std::move(s);
  return out;
}

CollectedAnswer collect_answer(StartedCompletion& s, RequestContext& ctx, bool echo) {
  GenerationRun& run = *s.run;
  CollectedAnswer out;
  const std::size_t n = s.prompt_texts.empty() ? 1 : std::max<std::size_t>(1, run.choices() / s.prompt_texts.size());
  std::vector<ChoiceResult>& results = out.results;
  results.resize(run.choices());
  for (std::size_t i = 0; i < results.size(); ++i) {
    results[i].index = i;
    results[i].finish_reason = "cancelled";
    if (echo) results[i].prefix = s.prompt_texts[i / n];
  }
  std::vector<std::string> finish(run.choices(), "cancelled");
  while (!run.done()) {
    for (auto& d : run.poll(kPollInterval)) {
      auto& r = results[d.index];
      r.text += d.text;
      r.tokens.insert(r.tokens.end(), d.tokens.begin(), d.tokens.end());
      if (d.finish_reason) r.finish_reason = finish[d.index] = *d.finish_reason;
      if (d.stop_sequence) r.stop_sequence = d.stop_sequence;
    }
    if (!run.done() && ctx.client_gone()) {
      run.cancel();
      record_end(s, finish);
      logger().information("request %s: the client closed the connection before the answer; its sequences are "
                           "cancelled",
                           std::to_string(ctx.request_id));
      out.error = errors::client_closed();
      return out;
    }
  }
  record_end(s, finish);
  if (run.error() && run.aborted()) {
    out.error = errors::shutting_down();
    return out;
  }
  if (run.error()) {
    logger().error("request %s: generation failed: %s", std::to_string(ctx.request_id), *run.error());
    out.error = errors::generation_failed(*run.error());
    return out;
  }
  std::int64_t reasoning_tokens = 0;
  if (s.meta.kind == CompletionKind::chat) {
    for (auto& r : results) {
      ChatOutputParser parser(s.output);
      ChatPieces a = parser.push(r.text);
      ChatPieces b = parser.finish();
      r.reasoning = a.reasoning + b.reasoning;
      r.text = a.content + b.content;
      r.tool_calls.clear();
      merge_tool_pieces(r.tool_calls, a.tool_calls);
      merge_tool_pieces(r.tool_calls, b.tool_calls);
      r.finish_reason = client_finish(r.finish_reason, r.tool_calls.size());
      for (const auto& t : r.tokens) reasoning_tokens += t.text_start < parser.reasoning_bytes() ? 1 : 0;
    }
  }
  out.usage = usage_of(s, reasoning_tokens);
  return out;
}

Reply stream_reply(std::unique_ptr<StartedCompletion> s, std::unique_ptr<StreamFormat> format) {
  struct Job {
    std::unique_ptr<StartedCompletion> s;
    std::unique_ptr<StreamFormat> format;
  };
  auto job = std::make_shared<Job>(Job{std::move(s), std::move(format)});
  Reply reply;
  reply.status = 200;
  reply.content_type = "text/event-stream";
  reply.add_header("Cache-Control", "no-cache");
  reply.stream = [job](StreamSink& sink) {
    drive_stream(*job->s, *job->format, sink);
    job->s->run.reset();  // cancel anything left and free the tenant's share now
    job->s->ticket.release();
  };
  return reply;
}

}  // namespace memra::server
