#include "host/engine/generate.hpp"

#include <algorithm>
#include <chrono>

namespace memra::engine {
namespace {

// What both loops refuse before they touch the engine.
Status check_request(const Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options) {
  if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (auto bad = validate(options.sampling)) return make_error(ErrorCode::invalid_argument, *bad);
  if (static_cast<int64_t>(prompt.size()) >= engine.max_context())
    return make_error(ErrorCode::invalid_argument, "the prompt has " + std::to_string(prompt.size()) +
                                                       " tokens; the context holds " + std::to_string(engine.max_context()));
  return {};
}

// Whether a token's logits row must reach the host (logprobs, dumps).
bool wants_token_logits(const GenerateOptions& o) {
  return o.token_logits || o.prompt_logits || o.sampling.logprobs || o.sampling.top_logprobs > 0;
}

// Closes the loop's sequence however it ends.
struct SequenceCloser {
  Engine& engine;
  int32_t seq;
  ~SequenceCloser() { engine.close_sequence(seq); }
};

}  // namespace

Result<GenerateResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options,
                                const std::function<void(std::span<const float>)>& on_prompt_logits,
                                const std::function<bool(const TokenEvent&)>& on_token) {
  if (Status st = check_request(engine, prompt, options); !st) return st.error();
  const int32_t seq = engine.open_sequence();
  SequenceCloser closer{engine, seq};

  GenerateResult result;
  // The engine samples (on the GPU when it can); logits rows come to the host only
  // for logprobs, prompt logits (memra-gen --dump-logits) or token_logits.
  RowSampling rs{&options.sampling, prompt.size(), prompt, {}, {}, 1, wants_token_logits(options), {}};
  StepRequest prefill{seq, prompt, options.prompt_logits, /*prompt=*/true, &rs};
  auto rows = engine.step_sampled({&prefill, 1});
  if (!rows) return rows.error();
  if (options.prompt_logits && on_prompt_logits)
    for (const auto& r : rows->front().logits) on_prompt_logits(r);
  StepRows last = std::move(rows->front());

  result.finish_reason = "length";
  const int64_t budget = std::min(options.max_tokens, engine.max_context() - static_cast<int64_t>(prompt.size()));
  for (int64_t i = 0; i < budget; ++i) {
    SampleResult s;
    s.token = last.tokens.front();
    std::span<const float> logits;
    if (!last.logits.empty()) {
      logits = last.logits.back();
      fill_logprobs(logits, options.sampling, s);
    }
    result.tokens.push_back(s.token);
    TokenEvent ev{s.token, s.logprob, s.top, logits};
    const bool go_on = on_token ? on_token(ev) : true;
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), s.token) != options.stop_ids.end() || !go_on) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == budget) break;  // no need to run the last token through the model
    rs.position = prompt.size() + result.tokens.size();
    rs.output = result.tokens;
    StepRequest d{seq, {&result.tokens.back(), 1}, false, false, &rs};
    auto next = engine.step_sampled({&d, 1});
    if (!next) return next.error();
    last = std::move(next->front());
  }
  return result;
}

Result<GenerateResult> generate_speculative(Engine& engine, std::span<const int32_t> prompt,
                                            const GenerateOptions& options, const SpeculativeOptions& spec,
                                            const std::function<bool(const TokenEvent&)>& on_token) {
  if (!spec.drafter || spec.k < 1) return make_error(ErrorCode::invalid_argument, "speculative decoding needs a drafter and k >= 1");
  if (Status st = check_request(engine, prompt, options); !st) return st.error();
  const int32_t seq = engine.open_sequence();
  SequenceCloser closer{engine, seq};
  spec.drafter->attach(seq);
  // A drafter that reads the target's hidden states (an MTP head) gets them with every step.
  const bool hidden = spec.drafter->wants_target_hidden();
  auto hand_hidden = [&](int64_t first_position, std::span<const int32_t> tokens, bool final_tokens, const StepRows& r) {
    if (hidden) spec.drafter->target_hidden(first_position, tokens, final_tokens, r.hidden, engine.hidden_width());
  };

  const bool want_rows = wants_token_logits(options);
  RowSampling first{&options.sampling, prompt.size(), prompt, {}, {}, 1, want_rows, {}};
  StepRequest prefill{seq, prompt, false, /*prompt=*/true, &first};
  prefill.want_hidden = hidden;
  auto rows = engine.step_sampled({&prefill, 1});
  if (!rows) return rows.error();
  hand_hidden(0, prompt, true, rows->front());

  GenerateResult result;
  result.finish_reason = "length";
  const int64_t budget = std::min(options.max_tokens, engine.max_context() - static_cast<int64_t>(prompt.size()));
  std::vector<int32_t> context(prompt.begin(), prompt.end());
  bool done = false;
  // Emits a token sampled as generate() samples it (the row: for logprobs, may be empty).
  auto emit = [&](int32_t token, std::span<const float> logits) {
    SampleResult s;
    s.token = token;
    if (!logits.empty()) fill_logprobs(logits, options.sampling, s);
    result.tokens.push_back(s.token);
    context.push_back(s.token);
    TokenEvent ev{s.token, s.logprob, s.top, logits};
    const bool go_on = on_token ? on_token(ev) : true;
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), s.token) != options.stop_ids.end() || !go_on) {
      result.finish_reason = "stop";
      done = true;
    } else if (static_cast<int64_t>(result.tokens.size()) >= budget) {
      done = true;
    }
    return s.token;
  };

  emit(rows->front().tokens.front(), rows->front().logits.empty() ? std::span<const float>{} : rows->front().logits.back());
  SpecGate gate(spec.policy, spec.drafter->draft_token_cost());
  StepCostModel step_costs;
  while (!done) {
    // Feed the pending token plus the drafts that still fit the budget and context.
    const int64_t room = std::max<int64_t>(0, std::min<int64_t>(budget - static_cast<int64_t>(result.tokens.size()),
                                                                engine.max_context() - engine.sequence_length(seq) - 1));
    std::vector<int32_t> draft;
    if (gate.active()) draft = spec.drafter->draft(context, static_cast<int>(std::min<int64_t>(spec.k, room)));
    if (static_cast<int64_t>(draft.size()) > room) draft.resize(static_cast<size_t>(room));
    std::vector<int32_t> feed{result.tokens.back()};
    feed.insert(feed.end(), draft.begin(), draft.end());
    const int64_t before = engine.sequence_length(seq);
    // Every row sampled at its own position with plain decode's penalty context (the
    // drafts before it taken as emitted; a row after a rejected draft is never used).
    RowSampling rs{&options.sampling, prompt.size() + result.tokens.size(), prompt, result.tokens, draft,
                   static_cast<int32_t>(feed.size()), want_rows, {}};
    StepRequest verify{seq, feed, !draft.empty(), false, &rs};
    verify.want_hidden = hidden;
    const auto t0 = std::chrono::steady_clock::now();
    auto out = engine.step_sampled({&verify, 1});
    if (!out) return out.error();
    hand_hidden(before, feed, false, out->front());
    step_costs.observe(static_cast<int64_t>(feed.size()),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    StepRows& vr = out->front();
    if (spec.verify_hook && !draft.empty()) spec.verify_hook(vr.tokens);  // tests: the identity gate must catch it
    size_t accepted = 0;
    for (size_t i = 0; i <= draft.size() && !done; ++i) {
      const int32_t tok = emit(vr.tokens[i], vr.logits.empty() ? std::span<const float>{} : std::span<const float>(vr.logits[i]));
      if (i < draft.size() && tok == draft[i]) {
        ++accepted;
        continue;
      }
      break;
    }
    if (draft.empty()) {
      ++result.plain_steps;
      gate.plain(1);
      continue;
    }
    ++result.verify_steps;
    result.drafted += static_cast<int64_t>(draft.size());
    result.accepted += static_cast<int64_t>(accepted);
    gate.record(static_cast<int64_t>(draft.size()), static_cast<int64_t>(accepted), verify_token_cost(spec.policy, step_costs));
    // Keep the KV of the pending token and the accepted drafts; the last emitted token
    // is the next step's pending one.
    if (auto st = engine.truncate_sequence(seq, before + 1 + static_cast<int64_t>(accepted)); !st) return st.error();
    spec.drafter->verified(context, static_cast<int>(draft.size()), static_cast<int>(accepted));
  }
  result.fallbacks = gate.fallbacks();
  return result;
}

}  // namespace memra::engine
