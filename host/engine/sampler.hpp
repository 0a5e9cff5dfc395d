// Token sampling: penalties, greedy, temperature, top-k, top-p, min-p, seeded draws
// keyed by (seed, position), and logprobs with top alternatives. The token comes
// from the canonical sampler (kernels/sampling/sampling_ref.hpp), which the CUDA
// kernel reproduces bit for bit, so a sequence's tokens do not depend on which
// backend sampled them (docs/ARCHITECTURE.md, "Sampling").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/sampling/sampling_math.cuh"

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

// logit_bias: added to a token's logit before everything else the sampler does.
// A logit_bias entry: the sampler's step 0 entry (kernels/sampling, shared with the kernel).
using LogitBias = sampling::BiasEntry;

// Step 0 of the canonical sampler (docs/ARCHITECTURE.md, "Sampling"): a request's
// logit_bias and its grammar's token mask. Each biased logit is one IEEE add
// (logit + bias); a token the mask leaves out becomes -inf. The CUDA kernel has no
// step 0 yet, so the scheduler samples such rows on the host (same tokens: the kernel
// is bitwise the reference on the adjusted row).
struct RowAdjust {
  std::span<const LogitBias> bias;              // ids unique
  const std::vector<uint64_t>* allowed = nullptr;  // bit id%64 of word id/64; null = every token
  bool empty() const { return bias.empty() && allowed == nullptr; }
};
std::vector<float> adjusted_row(std::span<const float> logits, const RowAdjust& adjust);
// Whether `adjust` leaves at least one token of a `vocab`-sized row.
bool any_allowed(const RowAdjust& adjust, int64_t vocab);

// Returns an error message when params are out of range, else nullopt.
std::optional<const char*> validate(const SamplingParams& params);

// Samples the token at sequence position `position` from `logits` (one row).
// `prompt` and `output` are the sequence's tokens so far (for penalties).
SampleResult sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                    std::span<const int32_t> prompt, std::span<const int32_t> output);

// The canonical sampler's inputs for a row at `position`.
sampling::RowParams row_params(const SamplingParams& params, uint64_t position);
// The row's penalty entries (unique ids, ascending): every token of prompt and output
// when the repetition penalty is on, and the output tokens with their counts when a
// presence or frequency penalty is; `assumed` are tokens taken as emitted after
// `output` (the drafts before a verify row). Empty when no penalty is on.
std::vector<sampling::PenaltyEntry> penalty_entries(const SamplingParams& params, std::span<const int32_t> prompt,
                                                    std::span<const int32_t> output,
                                                    std::span<const int32_t> assumed = {});

// Logprobs of the chosen token (and the top alternatives) under the raw logits, as
// sample() reports them, for a token sampled elsewhere (on the device).
void fill_logprobs(std::span<const float> logits, const SamplingParams& params, SampleResult& result);

// Index of the largest value; the lowest index wins ties.
int32_t argmax(std::span<const float> logits);

}  // namespace memra::engine
