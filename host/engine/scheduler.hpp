// The serving scheduler: continuous batching over one Engine.
//
// Requests wait in a queue (priority, then arrival) until the KV cache can hold
// their worst case (prompt + max_tokens), so a running sequence never fails for
// lack of memory. A queued sequence that does not fit yet does not block smaller
// ones behind it that do (backfill) until it has waited backfill_window; from then
// on nothing behind it starts before it does (starvation protection for the large).
// Every iteration builds one engine step from all running sequences: a prefill
// chunk for those still reading their prompt (bounded by a per-step token
// budget) and one token for each decoding sequence. Sampling is keyed by (seed,
// position), and every kernel row is independent of the batch, so a sequence's
// tokens are the same alone, batched, chunked, or with a prefix-cache hit.
//
// Speculative decoding (when a drafter factory is set): a decoding sequence's
// step carries its last token plus up to spec_k drafts, and every position is
// sampled exactly as a one-token step would sample it (rows are batch invariant,
// draws keyed by (seed, position)), so the tokens are the same with or without
// it. It pauses per sequence while its acceptance makes it slower (SpecGate) and
// for everyone while more than spec_max_batch sequences run (plain batched
// decode then uses the device better).
//
// Embeddings (SequenceRequest::embedding): the sequence only reads its prompt, in
// chunks like any prefill, under the same admission (KV for the prompt), queue and
// cancellation, but in steps of their own (Engine::step_hidden: final hidden states,
// no logits), which alternate with the generation steps while both kinds wait. When
// the prompt is read its pooled vector is delivered and its KV freed. Rows are batch
// invariant and pooling follows positions, so an embedding is bitwise the same alone,
// batched, chunked or beside generation.
//
// Threading: one scheduler thread owns the Engine (and the draft engine, if any). submit()/cancel()/stats() are
// safe from any thread; a SequenceHandle is read by one consumer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/common/result.hpp"
#include "host/engine/drafter.hpp"
#include "host/engine/embedding_vector.hpp"
#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "host/engine/spec_policy.hpp"
#include "host/engine/token_constraint.hpp"

namespace memra::engine {

struct SchedulerOptions {
  int64_t max_step_tokens = 512;   // prefill chunk budget per step (decode tokens count too)
  int64_t max_running = 16;        // sequences decoding at once
  int64_t max_waiting = 256;       // queue bound; beyond it submit() fails with conflict
  // How long a queued sequence that does not fit may be passed by later ones that do.
  std::chrono::milliseconds backfill_window{5000};
  // Speculative decoding: off while make_drafter is empty. Called on the scheduler
  // thread, once per admitted sequence.
  std::function<std::unique_ptr<Drafter>()> make_drafter{};
  int spec_k = 4;                  // drafts per verify step (at most half the step budget the decode tokens leave)
  SpecPolicy spec_policy{};        // the per-sequence fallback
  int64_t spec_max_batch = 4;      // no speculation while more sequences than this run
  // Rolling groups (a pipeline of stages): 2 splits the running sequences into two
  // groups whose steps alternate in the engine's two step slots, each group's next
  // step issued while the other's is still running (Engine::step_issue), so stage 0
  // works on one group while stage 1 works on the other. 1 = one step at a time.
  int32_t pipeline_groups = 1;
  // Tests only: may alter the tokens a verify step sampled, as a verify step whose rows are
  // not bitwise a one-token step's would (to prove the identity gates have teeth).
  std::function<void(std::vector<int32_t>&)> verify_hook{};
};

struct SequenceRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 256;
  std::vector<int32_t> stop_ids;
  std::string cache_namespace;     // (model, tenant, salt); empty = no prefix caching
  int64_t priority = 0;            // waits ahead of queued requests of lower priority (FIFO among equals)
  // Step 0 of the canonical sampler (sampler.hpp RowAdjust): logit_bias (ids unique, in
  // the vocabulary) and a grammar (made once per sequence at admission). Such sequences'
  // rows are sampled on the host, whatever the backend.
  std::vector<LogitBias> logit_bias;
  TokenConstraintFactory constraint;
  // Set: an embedding request. The prompt is read (max_tokens, sampling, stop ids and
  // the prefix cache play no part) and its final hidden states pooled this way; the
  // update that ends it (FinishReason::stop) carries the vector.
  std::optional<Pooling> embedding;
};

// cancelled: by its consumer (SequenceHandle::cancel); aborted: by the server (abort_all, shutdown).
enum class FinishReason { none, stop, length, cancelled, error, aborted };
const char* to_string(FinishReason r);

struct GeneratedToken {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// What the consumer receives: tokens since the last wait, and the end.
struct SequenceUpdate {
  std::vector<GeneratedToken> tokens;
  bool started = false;            // the prompt has been read (first token or end)
  FinishReason finish = FinishReason::none;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;       // prompt tokens served from the prefix cache
  int64_t cache_written_tokens = 0;  // prompt tokens this sequence wrote to the prefix cache (whole blocks new to it)
  int64_t drafted_tokens = 0;      // speculative decoding: drafts fed to verify steps (cumulative)
  int64_t accepted_tokens = 0;     // ... and accepted
  std::vector<float> embedding;    // an embedding request's pooled vector (with its end)
};

class SequenceHandle {
 public:
  // Waits until there is news or `timeout` passes; returns false on timeout.
  bool wait(SequenceUpdate& out, std::chrono::milliseconds timeout);
  // Stops the sequence; its KV is freed at the scheduler's next iteration.
  void cancel() { cancelled_.store(true); }
  // Waits until the scheduler admitted the sequence (its KV is reserved) or it ended;
  // false when `timeout` passed first.
  bool wait_admitted(std::chrono::milliseconds timeout);

 private:
  friend class Scheduler;
  void publish(const GeneratedToken* token, FinishReason finish, std::string error);
  void publish_embedding(std::vector<float> vector);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<GeneratedToken> pending_;
  bool started_ = false;
  bool admitted_ = false;
  FinishReason finish_ = FinishReason::none;
  std::string error_;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  int64_t cache_written_tokens_ = 0;
  int64_t drafted_tokens_ = 0;
  int64_t accepted_tokens_ = 0;
  std::vector<float> embedding_;
  std::atomic<bool> cancelled_{false};
};

struct SchedulerStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_free = 0;       // not held by any sequence or the prefix cache
  int64_t prefix_cache_blocks = 0;
  int64_t prefix_hit_tokens = 0;    // cumulative
  int64_t prompt_tokens = 0;        // cumulative
  int64_t generated_tokens = 0;     // cumulative
  int64_t steps = 0;
  int64_t spec_drafted = 0;         // cumulative: drafts fed to verify steps
  int64_t spec_accepted = 0;        // cumulative: drafts accepted
  int64_t spec_verify_steps = 0;    // cumulative: sequence-steps that carried drafts
  int64_t spec_fallbacks = 0;       // cumulative: times a sequence's gate turned speculation off
  // Where the scheduler thread's time goes (cumulative seconds): waiting for step results,
  // issuing steps (the forward pass's host side), and the rest (sampling, publishing,
  // planning). Rolling groups overlap the wait of one group with the other's step.
  double step_wait_seconds = 0, step_issue_seconds = 0, host_seconds = 0;
};

class Scheduler {
 public:
  Scheduler(Engine& engine, SchedulerOptions options);
  ~Scheduler();  // cancels everything and joins the thread

  // Fails at once (invalid_argument) when the request can never run: empty prompt,
  // bad sampling params, prompt + max_tokens beyond the context or the whole KV
  // cache; (conflict) when the waiting queue is full.
  Result<std::shared_ptr<SequenceHandle>> submit(SequenceRequest request);
  SchedulerStats stats() const;
  const SchedulerOptions& options() const { return options_; }
  // Ends every sequence, running or queued, with FinishReason::aborted and `reason`
  // (at the scheduler's next iteration; a step in flight first completes). Later
  // submissions fail. For a drain that runs out of time.
  void abort_all(std::string reason);

 private:
  struct Job {
    SequenceRequest req;
    std::shared_ptr<SequenceHandle> handle;
    int32_t seq = -1;
    std::chrono::steady_clock::time_point queued_at;
    std::vector<int64_t> reserved_blocks;  // per KV pool
    int64_t prompt_done = 0;          // prompt tokens already in the KV cache
    std::vector<int32_t> output;
    std::vector<int32_t> context;     // prompt + output (what drafters read)
    std::unique_ptr<Drafter> drafter; // speculative decoding, when on
    std::unique_ptr<TokenConstraint> constraint;  // req.constraint's, made at admission
    SpecGate gate;
    std::vector<int32_t> feed;        // this step's decode tokens: the last one + drafts
    int64_t drafted = 0, accepted = 0;
    int32_t group = 0;                // rolling groups: which slot's steps carry it
    bool in_flight = false;           // in an issued, not yet collected step
    std::string grammar_dead;         // set by attach_sampling: the grammar allows no token (why)
    std::optional<Pooler> pooler;     // an embedding request's
    bool embedding() const { return req.embedding.has_value(); }
  };
  // One engine step: what was fed for whom, and (rolling) its pending result.
  struct Flight {
    std::vector<StepRequest> reqs;
    std::vector<Job*> jobs;
    std::vector<int64_t> chunk;       // prompt tokens fed per job (0 = decode)
    std::unique_ptr<PendingStep> pending;
    std::vector<RowSampling> sampling;  // per request, when the engine samples (attach_sampling)
    // Step 0 of the requests' sampled rows (logit_bias, grammar masks), and the
    // constraint states the masks of verify rows belong to (alive until sampled).
    std::vector<std::vector<RowAdjust>> adjust;
    std::vector<std::unique_ptr<TokenConstraint>> probes;
  };
  // Builds the next step for the running jobs of `group` (-1: all): decode tokens first
  // (the last token, plus drafts when speculating), then prefill chunks within the budget.
  Flight plan_step(int32_t group, std::unique_lock<std::mutex>& lock);
  // The next embedding step: prompt chunks of the running embedding jobs within the budget.
  Flight plan_embedding_step();
  // Whether this iteration steps embeddings: some wait, and no generation does or the
  // last step was a generation step (the two kinds alternate).
  bool embedding_turn() const;
  // One embedding step: plans it, runs it with the lock released, completes it.
  void run_embedding_step(std::unique_lock<std::mutex>& lock);
  // Pools an embedding step's rows; delivers and finishes the jobs whose prompt is read.
  void complete_embedding_step(Flight& flight, Result<std::vector<std::vector<float>>> out);
  // Engine-side sampling (Engine::step_sampled): each request's RowSampling.
  void attach_sampling(Flight& flight);
  // Takes a step's result (tokens, plus logits rows only where logprobs or the verify
  // hook need them): publishes, finishes what ended.
  void complete_step(Flight& flight, Result<std::vector<StepRows>> out);
  void cancel_locked();               // cancelled jobs that are not in flight
  // After a step fed `chunk` prompt tokens (0: a decode step): whether its row is the
  // first token's (prompt done; the prompt then enters the prefix cache) or a decode one.
  bool prompt_read(Job& job, int64_t chunk);
  void rebalance_locked(int32_t group);
  void run_rolling(std::unique_lock<std::mutex>& lock);
  // The top of a scheduler iteration: waits for work, drops cancelled jobs, admits what
  // fits. stop: shutting down; idle: nothing runs yet (loop again); ready: step.
  enum class Wake { stop, idle, ready };
  Wake wake_locked(std::unique_lock<std::mutex>& lock);
  void run();
  void admit_locked();
  void update_stats_locked();
  void finish(Job& job, FinishReason reason, std::string error = {});
  // Sets each job's feed: its last token + up to k drafts (drafted in one batch).
  void draft_all(const std::vector<Job*>& decoding, int k);
  // Takes the tokens the engine sampled for one step of `job` (one per row; rows holds
  // logits rows only where logprobs were asked); returns what ended it (none = running).
  FinishReason consume(Job& job, const std::vector<std::vector<float>>& rows, std::vector<int32_t>& tokens);
  // Step 0 of a job's `rows` sampled rows (logit_bias; row t masked by the constraint
  // after the drafts before it), into flight.adjust[i]; false when the grammar allows no
  // token at a row that will be read (job.grammar_dead says so).
  bool attach_step0(Flight& flight, size_t i, Job& job, int32_t rows);

  Engine& engine_;
  SchedulerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> waiting_;
  std::vector<std::unique_ptr<Job>> running_;
  std::vector<int64_t> reserved_blocks_;  // per KV pool, by the running jobs
  SchedulerStats stats_;
  // Whether `need` blocks (per KV pool, Engine::kv_blocks_for) fit every pool: beside the
  // running jobs' reservations, or (beside_reserved false) in an empty cache at all.
  bool fits(const std::vector<int64_t>& need, bool beside_reserved) const;
  bool stop_ = false;
  std::string abort_reason_;  // set: abort_all() was called
  StepCostModel step_costs_;  // decode steps' wall time against their tokens (spec fallback)
  bool last_step_embedding_ = false;  // the kinds alternate (embedding_turn)
  std::thread thread_;
};

}  // namespace memra::engine
