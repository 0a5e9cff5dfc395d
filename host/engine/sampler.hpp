// Token sampling on the CPU: penalties, greedy, temperature, top-k, top-p, min-p,
// seeded draws keyed by (seed, position), and logprobs with top alternatives.
// Deterministic by construction: candidates are ordered by (probability desc,
// id asc) and the draw depends only on (seed, position).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace memra::engine {

struct SamplingParams {
  float temperature = 1.0f;          // 0 = greedy
  int32_t top_k = 0;                 // 0 = off
  float top_p = 1.0f;                // 1 = off
  float min_p = 0.0f;                // 0 = off
  float repetition_penalty = 1.0f;   // HF style, over prompt and output; 1 = off
  float presence_penalty = 0.0f;     // OpenAI style, over output tokens
  float frequency_penalty = 0.0f;    // OpenAI style, over output tokens
  uint64_t seed = 0;
  int32_t top_logprobs = 0;          // alternatives to report (0..20)
  bool logprobs = false;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;                 // of the chosen token under the raw distribution
  std::vector<TokenLogprob> top;        // top alternatives, best first (when asked)
};

// Returns an error message when params are out of range, else nullopt.
std::optional<const char*> validate(const SamplingParams& params);

// Samples the token at sequence position `position` from `logits` (one row).
// `prompt` and `output` are the sequence's tokens so far (for penalties).
SampleResult sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                    std::span<const int32_t> prompt, std::span<const int32_t> output);

// Index of the largest value; the lowest index wins ties.
int32_t argmax(std::span<const float> logits);

}  // namespace memra::engine
