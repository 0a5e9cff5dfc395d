#include "host/engine/generate.hpp"

#include <algorithm>

namespace memra::engine {

Result<GenerateResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options,
                                const std::function<void(std::span<const float>)>& on_prompt_logits,
                                const std::function<bool(const TokenEvent&)>& on_token) {
  if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (auto bad = validate(options.sampling)) return make_error(ErrorCode::invalid_argument, *bad);
  if (static_cast<int64_t>(prompt.size()) >= engine.max_context())
    return make_error(ErrorCode::invalid_argument, "the prompt has " + std::to_string(prompt.size()) +
                                                       " tokens; the context holds " + std::to_string(engine.max_context()));
  const int32_t seq = engine.open_sequence();
  struct Closer {
    Engine& e;
    int32_t s;
    ~Closer() { e.close_sequence(s); }
  } closer{engine, seq};

  StepRequest prefill{seq, prompt, options.prompt_logits};
  auto rows = engine.step({&prefill, 1});
  if (!rows) return rows.error();
  if (options.prompt_logits && on_prompt_logits)
    for (const auto& r : *rows) on_prompt_logits(r);
  std::vector<float> logits = std::move(rows->back());

  GenerateResult result;
  result.finish_reason = "length";
  const int64_t budget = std::min(options.max_tokens, engine.max_context() - static_cast<int64_t>(prompt.size()));
  for (int64_t i = 0; i < budget; ++i) {
    const uint64_t position = prompt.size() + static_cast<uint64_t>(i);
    const SampleResult s = sample(logits, options.sampling, position, prompt, result.tokens);
    result.tokens.push_back(s.token);
    TokenEvent ev{s.token, s.logprob, s.top, logits};
    const bool go_on = on_token ? on_token(ev) : true;
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), s.token) != options.stop_ids.end() || !go_on) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == budget) break;  // no need to run the last token through the model
    StepRequest d{seq, {&result.tokens.back(), 1}, false};
    auto next = engine.step({&d, 1});
    if (!next) return next.error();
    logits = std::move(next->front());
  }
  return result;
}

}  // namespace memra::engine
