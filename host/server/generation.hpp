// One completion request in flight on a served model: its sequences (prompts x
// n) submitted to the scheduler, turned back into text as tokens arrive, with
// stop strings applied so their text never leaves the server. Both the JSON and
// the SSE answers are built from what poll() returns. Destroying a run cancels
// whatever still runs, so a client that goes away frees its KV at the
// scheduler's next step.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "host/engine/sampler.hpp"
#include "host/engine/token_constraint.hpp"
#include "host/server/served_model.hpp"
#include "host/tokenizer/tokenizer.hpp"

namespace memra::server {

struct GenerationSpec {
  std::vector<std::vector<std::int32_t>> prompts;  // one choice group per prompt
  std::int64_t n = 1;                              // choices per prompt
  engine::SamplingParams sampling;                 // choice i samples with seed + i
  std::int64_t max_tokens = 16;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::string cache_namespace;
  std::int64_t priority = 0;  // the tenant's: orders the scheduler's queue
  std::vector<engine::LogitBias> logit_bias;
  engine::TokenConstraintFactory constraint;  // structured output / forced tool call; empty = none
};

// A generated token and where its text sits in the choice's text.
struct TokenRecord {
  std::int32_t id = 0;
  float logprob = 0.0f;
  std::vector<engine::TokenLogprob> top;
  std::size_t text_start = 0;
  std::size_t text_end = 0;
};

// What is new for one choice since the last poll.
struct ChoiceDelta {
  std::size_t index = 0;
  std::string text;                          // chat: the content part
  std::vector<TokenRecord> tokens;           // tokens whose text is now released
  std::optional<std::string> finish_reason;  // "stop" or "length" when the choice ended
  std::optional<std::string> stop_sequence;  // the stop string that ended it, if one did
};

class GenerationRun {
 public:
  // Submits every sequence. Errors: ErrorCode::conflict when the scheduler's queue
  // is full (nothing stays submitted), invalid_argument when it can never run.
  static Result<std::unique_ptr<GenerationRun>> start(ServedModel& model, const GenerationSpec& spec);
  ~GenerationRun();

  // Waits until the scheduler admitted every sequence (the device gate), polling
  // `client_gone` every 50 ms. On timed_out or client_gone everything is cancelled.
  enum class Admission { admitted, timed_out, client_gone };
  Admission wait_admitted(std::chrono::milliseconds timeout, const std::function<bool()>& client_gone);
  GenerationRun(const GenerationRun&) = delete;
  GenerationRun& operator=(const GenerationRun&) = delete;

  // Waits up to `timeout` for progress, then returns the news of every choice
  // that has some (empty when none).
  std::vector<ChoiceDelta> poll(std::chrono::milliseconds timeout);
  bool done() const;
  // Set when a sequence failed in the engine or was cancelled by the server (shutdown).
  const std::optional<std::string>& error() const { return error_; }
  // The server ended it (a drain out of time, shutdown), not the engine failing.
  bool aborted() const { return aborted_; }
  void cancel();

  std::size_t choices() const { return choices_.size(); }
  std::int64_t prompt_tokens() const;      // each prompt counted once
  std::int64_t completion_tokens() const;  // every generated token of every choice
  std::int64_t cached_tokens() const;      // prompt tokens served from the prefix cache (first choice of each prompt)
  std::int64_t cache_written_tokens() const;  // prompt tokens the choices wrote to the prefix cache (whole blocks new to it)
  std::int64_t drafted_tokens() const;     // speculative decoding: drafts verified, all choices
  std::int64_t accepted_tokens() const;    // ... and accepted

  // Latency observers (seconds): time to each choice's first token; per-token gaps after it.
  std::function<void(double)> on_first_token;
  std::function<void(double)> on_token_gap;

 private:
  struct Choice;
  GenerationRun() = default;
  void process(Choice& c, const engine::SequenceUpdate& u, std::chrono::steady_clock::time_point now,
               ChoiceDelta& delta, bool& news);

  ServedModel* model_ = nullptr;
  GenerationSpec spec_;
  std::vector<std::unique_ptr<Choice>> choices_;
  std::optional<std::string> error_;
  bool aborted_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace memra::server
