// How many tokens a completion request may generate: the one rule, in one place
// (docs/SERVING.md, "How many tokens a request generates"). It depends only on the
// request, the model's context, --default-max-tokens and the key's max_kv_tokens,
// never on load, so the same request always gets the same length (and the same
// tokens: a shorter run is a prefix of a longer one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/server/api_error.hpp"

namespace memra::server {

struct TokenBudgetInput {
  std::optional<std::int64_t> requested;   // max_tokens / max_completion_tokens, when given
  std::vector<std::int64_t> prompt_tokens; // each prompt's length
  std::int64_t n = 1;                      // choices per prompt
  std::int64_t context = 0;                // the model's context (prompt + generated per sequence)
  std::int64_t default_max_tokens = 0;     // --default-max-tokens; 0 = the context left
  std::int64_t tenant_kv_tokens = 0;       // the key's max_kv_tokens; 0 = none
  std::string prompt_param = "messages";   // where a too-long prompt is reported
  std::string model;                       // for messages
};

struct TokenBudget {
  std::int64_t max_tokens = 0;        // per sequence
  std::int64_t kv_tokens = 0;         // what the request reserves: sum over prompts of (prompt + max_tokens) x n
  std::optional<ApiError> error;      // 400 context_length_exceeded or kv_budget_exceeded
};

// Given max_tokens: prompt + max_tokens must fit the context (else 400). Omitted: the
// smallest of the context left after the longest prompt, --default-max-tokens, and
// the largest value that keeps the request within the key's max_kv_tokens (if that
// is below 1, 400 kv_budget_exceeded).
TokenBudget token_budget(const TokenBudgetInput& in);

}  // namespace memra::server
