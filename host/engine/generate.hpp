// The single-sequence generation loop: prefill the prompt, then sample and feed
// back one token per step until a stop id, the token budget or the context ends.
// The serving scheduler batches many sequences; this loop is what memra-gen and
// the oracle tests use, and the reference the batched path must equal.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "host/engine/spec_policy.hpp"

namespace memra::engine {

struct GenerateOptions {
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_ids;   // EOS ids: generation ends after emitting one
  bool prompt_logits = false;      // report the logits of every prompt position
  // Fill TokenEvent::logits. Also on with prompt_logits or logprobs; otherwise a token's
  // row stays where it was sampled (on the GPU) and TokenEvent::logits is empty.
  bool token_logits = false;
};

struct TokenEvent {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
  std::span<const float> logits;   // the row this token was sampled from (GenerateOptions::token_logits)
};

struct GenerateResult {
  std::vector<int32_t> tokens;
  std::string finish_reason;       // "stop" (a stop id, or the callback said stop) | "length"
  int64_t drafted = 0;             // speculative decoding: tokens proposed by the drafter
  int64_t accepted = 0;            // ... and accepted by verification
  int64_t verify_steps = 0;        // steps that fed drafts
  int64_t plain_steps = 0;         // decode steps without drafts (nothing drafted, or the fallback was off)
  int64_t fallbacks = 0;           // times the fallback turned speculation off
};

// Speculative decoding: each step feeds the last sampled token plus up to `k` drafted
// ones, and samples every position of the verify step exactly as plain decode would
// (same logits row, same (seed, position) draw, same penalty context), accepting drafts
// while they equal what was sampled. The KV of rejected positions is rolled back. The
// tokens are therefore identical to generate()'s; only the number of steps changes.
// `verify_hook` (tests only) may alter the tokens a verify step sampled, as a
// non-invariant kernel would, to prove the identity gate catches it. `policy` is the automatic
// fallback (spec_policy.hpp): speculation pauses while it would be slower.
struct SpeculativeOptions {
  Drafter* drafter = nullptr;
  int k = 4;
  std::function<void(std::vector<int32_t>&)> verify_hook{};
  SpecPolicy policy{};
};
Result<GenerateResult> generate_speculative(Engine& engine, std::span<const int32_t> prompt,
                                            const GenerateOptions& options, const SpeculativeOptions& spec,
                                            const std::function<bool(const TokenEvent&)>& on_token);

// on_prompt_logits: called once per prompt position when options.prompt_logits is set.
// on_token: called for every generated token; return false to stop after it.
Result<GenerateResult> generate(Engine& engine, std::span<const int32_t> prompt, const GenerateOptions& options,
                                const std::function<void(std::span<const float>)>& on_prompt_logits,
                                const std::function<bool(const TokenEvent&)>& on_token);

}  // namespace memra::engine
