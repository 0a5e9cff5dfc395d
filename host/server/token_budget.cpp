#include "host/server/token_budget.hpp"

#include <algorithm>
#include <numeric>

namespace memra::server {

TokenBudget token_budget(const TokenBudgetInput& in) {
  TokenBudget out;
  const std::int64_t longest =
      in.prompt_tokens.empty() ? 0 : *std::max_element(in.prompt_tokens.begin(), in.prompt_tokens.end());
  const std::int64_t total_prompt = std::accumulate(in.prompt_tokens.begin(), in.prompt_tokens.end(), std::int64_t{0});
  const std::int64_t prompts = static_cast<std::int64_t>(in.prompt_tokens.size());
  const std::int64_t left = in.context - longest;
  if (left <= 0) {
    out.error = errors::context_length_exceeded(
        "the prompt is " + std::to_string(longest) + " tokens but the context of '" + in.model + "' is " +
            std::to_string(in.context) + " tokens, leaving no room to generate; shorten the prompt",
        in.prompt_param);
    return out;
  }
  if (in.requested) {
    if (*in.requested > left) {
      out.error = errors::context_length_exceeded(
          "the prompt (" + std::to_string(longest) + " tokens) plus max_tokens (" + std::to_string(*in.requested) +
              ") is over the context of '" + in.model + "' (" + std::to_string(in.context) +
              " tokens); lower max_tokens to at most " + std::to_string(left) + " or shorten the prompt",
          "max_tokens");
      return out;
    }
    out.max_tokens = *in.requested;
  } else {
    out.max_tokens = left;
    if (in.default_max_tokens > 0) out.max_tokens = std::min(out.max_tokens, in.default_max_tokens);
    if (in.tenant_kv_tokens > 0 && prompts > 0) {
      // (total_prompt + prompts x m) x n <= budget
      const std::int64_t room = (in.tenant_kv_tokens / in.n - total_prompt) / prompts;
      if (room < 1) {
        out.error = errors::kv_budget_exceeded((total_prompt + prompts) * in.n, in.tenant_kv_tokens);
        return out;
      }
      out.max_tokens = std::min(out.max_tokens, room);
    }
  }
  out.kv_tokens = (total_prompt + prompts * out.max_tokens) * in.n;
  return out;
}

}  // namespace memra::server
