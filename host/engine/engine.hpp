// memra::engine::Engine — one loaded model on one backend: the family plugin's
// model, the backend (host/backend/backend.hpp: CPU, CUDA or a pipeline of stages),
// the paged KV cache and the sequences living in it. A step runs any mix of sequences' new tokens (prefill
// chunks and decode tokens) through one forward pass.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "host/backend/backend.hpp"
#include "host/engine/kv_blocks.hpp"
#include "host/engine/memory_plan.hpp"
#include "host/engine/kv_dtype.hpp"
#include "host/engine/model_source.hpp"
#include "host/engine/prefix_cache.hpp"
#include "host/engine/sampler.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "host/ops/op_registry.hpp"

namespace memra::engine {

struct EngineOptions {
  int64_t block_size = 16;      // tokens per KV block
  int64_t max_context = 0;      // 0 = min(model's max positions, 4096); planned: see plan_memory
  int64_t max_sequences = 8;    // sequences the KV cache is sized for at full context; planned: at most
  // The memory plan (memory_plan.hpp; docs/SERVING.md, "Memory plan"), as memra-host runs:
  // after the weights are up and a dry step of max_step_tokens prompt tokens, the context
  // (max_context 0: the model's positions when one sequence of them fits, else the longest
  // that does), the KV cache and the recurrent state are sized from the device's free memory,
  // memory_fraction of it in all, for at most max_sequences sequences at full context, or
  // kv_cache_tokens (> 0) of cache. Pipeline stages do not plan yet (sized as when off).
  // Off: kv_cache_tokens (> 0) sizes the cache in whole contexts instead of max_sequences.
  bool plan_memory = false;
  double memory_fraction = 0.9;
  int64_t kv_cache_tokens = 0;
  // The backend: kind MEMRA_BACKEND_CPU (the reference) or MEMRA_BACKEND_CUDA
  // (libmemra-backend-cuda.so, opened at run time; fails with the reason when there is no
  // driver or module), and its settings. quant_lookup is the engine's to fill.
  backend::BackendOptions backend;
  // Pipeline parallelism (docs/ARCHITECTURE.md, "Pipeline stages"): the layers split into
  // this many contiguous ranges, each on its own backend of `backend`'s kind. 1 = one backend.
  int32_t pipeline_stages = 1;
  // Layers per stage, first stage first; stages-1 entries leave the rest to the last stage
  // (`--pp-split 18` = 18 layers on stage 0). Empty = balanced by weight + KV bytes.
  std::vector<int64_t> pipeline_split;
  // CUDA device of each stage; empty = 0, 1, ..., stages-1. Repeats are allowed (two
  // stages on one GPU: separate backends and streams). `backend.device` is ignored then.
  std::vector<int> pipeline_devices;
  // KV cache element type of every state group that does not declare its own
  // (memra_state_group.kv_dtype), on every backend: MEMRA_DTYPE_F16 (the default),
  // MEMRA_DTYPE_BF16 or MEMRA_DTYPE_F32 (K after RoPE and V rounded to the 16-bit type
  // when written; docs/ARCHITECTURE.md, "KV cache element type"). Anything else fails at load.
  memra_dtype kv_dtype = kDefaultKvDtype;
  // The most tokens one step adds to one sequence, and the rollback a sliding-window KV
  // pool always allows, for sizing such pools (docs/ARCHITECTURE.md, "State manager": a
  // pool keeps a sequence's window plus that many positions before it and one step's
  // tokens). A longer step is served while the pool has room.
  int64_t max_step_tokens = 512;
  // Models with recurrent state: how many state snapshots the prefix cache may hold (each
  // one sequence's recurrent state, recurrent_state_bytes() / the slots); -1 = max_sequences.
  // 0 turns the prefix cache off for such models.
  int64_t prefix_state_snapshots = -1;
  // ... and where inside a prompt: every this many tokens (rounded down to whole blocks), as
  // well as at its last block boundary, so prompts that share only their beginning hit too;
  // -1 = max_step_tokens (prompt steps end there anyway), 0 = the last boundary only.
  int64_t prefix_state_interval = -1;
  // Models with recurrent state whose ops write snapshots at rows (MEMRA_OP_SNAPSHOTS, ABI
  // 2.8): state slots per sequence for the rows of a multi-token generated step (a
  // speculative verify), so truncate_sequence within such a step copies the row's
  // snapshot back instead of replaying. Each is one sequence's state (a 27B hybrid: ~157
  // MB), so the tools set it to --spec-k only when they speculate. 0: always replay.
  int64_t state_snapshot_rows = 0;
  // Draft with the model's own draft head (an MTP layer, memra_plan_info.draft_layers, ABI
  // 2.9): its layer's KV is allocated (one more attention layer's) and step_head runs it.
  // Off: the head's weights load but nothing else is spent on it.
  bool draft_head = false;
};

struct RowSampling;

struct StepRequest {
  int32_t seq = 0;                 // from Engine::open_sequence
  std::span<const int32_t> tokens; // new tokens, appended at the sequence's current length
  bool all_logits = false;         // logits for every new token, else for the last one only
  // The tokens are prompt tokens (prefill), not generated ones. The CUDA backend computes
  // prompt rows on its tensor-core path and generated rows on the decode path; each is
  // batch invariant on its own, so a token must always be fed with the same flag.
  bool prompt = false;
  // Engine::step_sampled: sample this request's rows (RowSampling) instead of, or as
  // well as, returning its logits rows. Null: its logits rows, as step() returns them.
  const RowSampling* sampling = nullptr;
  // false: no row at all (a prompt chunk whose rows nobody reads: an embedding's
  // chunks before its last one). all_logits is then ignored.
  bool wants_rows = true;
  // step_sampled: also return the final hidden state of every new token (StepRows::hidden,
  // hidden_width() floats each): what a draft head reads (EngineOptions::draft_head).
  bool want_hidden = false;
};

// One sequence's rows of a draft-head step (Engine::step_head): row r at position
// `position + r` reads token tokens[r] (the token after that position) and the hidden
// state hidden[r * hidden_width() ..] (the model's at that position, or the head's own
// output of the row before when it drafts ahead).
struct HeadRequest {
  int32_t seq = 0;
  int64_t position = 0;
  std::span<const int32_t> tokens;
  std::span<const float> hidden;
};

// Its result: the last row's logits and the head's output hidden state there.
struct HeadRows {
  std::vector<float> logits, hidden;
};

// The rows a step returns for `r`: none, every new token's, or the last one's.
inline size_t step_rows(const StepRequest& r) { return !r.wants_rows ? 0 : r.all_logits ? r.tokens.size() : 1; }

// How Engine::step_sampled samples a request's rows: with the canonical sampler
// (sampler.hpp), on the device when the backend samples there (one int32 per row comes
// back), else on the host; the tokens are the same either way (docs/ARCHITECTURE.md, "Sampling").
struct RowSampling {
  const SamplingParams* params = nullptr;
  uint64_t position = 0;                    // sequence position of the first sampled row's token
  std::span<const int32_t> prompt, output;  // the sequence's history (penalties)
  // Sampled row r (of `rows`) assumes assumed[0..r) were emitted after `output`: the
  // drafts before a verify row, so each row sees plain decode's penalty context.
  std::span<const int32_t> assumed;
  int32_t rows = 1;           // sample the request's last `rows` logits rows (0: none)
  bool want_logits = false;   // also return all the request's logits rows on the host
  // Step 0 of each sampled row (logit_bias, a grammar's mask; sampler.hpp RowAdjust):
  // `rows` entries, or empty for none. Applied where the row is sampled, device or host,
  // with the same result; the pointed-to masks must live until the step is sampled.
  std::span<const RowAdjust> adjust;
};

// A request's result of Engine::step_sampled.
struct StepRows {
  // Its logits rows (as step() returns them) when it has no RowSampling or asked for
  // them (want_logits), else empty: on CUDA they never leave the device then.
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;  // one per sampled row, first row first
  std::vector<float> hidden;    // StepRequest::want_hidden: every new token's final hidden state
};

struct RowLayout;  // engine.cpp: where each request's rows are in a step's output

// A step issued by Engine::step_issue and not yet collected. Owns the step's host
// arrays: the backend may read them (and write the logits) until step_collect.
struct PendingStep {
  int32_t slot = -1;
  bool deferred = false;  // the logits arrive at step_collect (a rolling pipeline step)
  int64_t row_width = 0;  // floats per row: the vocabulary, or the hidden width (step_hidden)
  std::vector<int32_t> ids, positions, seq_index, seq_lens, tables, logit_rows;
  std::vector<uint8_t> prompt_flags;
  std::vector<int32_t> state_slots;  // per request: its recurrent-state slot (none without)
  std::vector<int32_t> snapshot_rows;  // per token: its row snapshot slot or -1 (empty: none)
  std::vector<float> logits;
  std::vector<float> hidden;  // [tokens][hidden width] when a request wants hidden rows
  memra_forward_batch batch{};
  bool sampled_on_device = false;  // step_issue_sampled: tokens come with the step
  std::vector<int32_t> tokens;     // ... here, at step_collect
};

// Why a plan has no draft head although its checkpoint declares one (the plan description's
// "draft_head_missing"), or "".
std::string plan_draft_head_missing(const plugins::ModelPlan& plan);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<ModelSource> source,
                                                const plugins::PluginHost& plugins, const EngineOptions& options);
  ~Engine();

  const ModelConfig& config() const { return source_->config; }
  const ModelSource& source() const { return *source_; }
  int64_t vocab_size() const { return vocab_; }
  // Floats in a final hidden state when the family can return them (step_hidden;
  // memra_plan_info.hidden_width, ABI 2.3), else 0.
  int64_t hidden_width() const { return hidden_width_; }
  int64_t max_context() const { return max_context_; }
  // The memory plan the caches were sized by (EngineOptions::plan_memory), else null.
  const MemoryPlan* memory_plan() const { return memory_plan_.get(); }
  // KV pools (docs/ARCHITECTURE.md, "State manager"): the full-attention layers' pool
  // first (when the model has such layers), then one per sliding-window size, each sized
  // for its window. kv_blocks() is pool 0's allocator.
  const KvBlockAllocator& kv_blocks() const { return pools_[0]; }
  int32_t num_kv_pools() const { return static_cast<int32_t>(pools_.size()); }
  const KvBlockAllocator& kv_pool(int32_t pool) const { return pools_[static_cast<size_t>(pool)]; }
  int64_t kv_pool_window(int32_t pool) const { return pool_window_[static_cast<size_t>(pool)]; }
  // The blocks of each pool a sequence of `tokens` tokens holds at most (a sliding pool:
  // its window, the rollback margin and one step's tokens), for admission.
  std::vector<int64_t> kv_blocks_for(int64_t tokens) const;

  // A new, empty sequence (its recurrent state zeroed), or -1 when the model keeps
  // recurrent state and every slot is taken (can_open_sequence() is false).
  int32_t open_sequence();
  // A sequence that starts on `prefix_blocks` (full blocks of pool 0 already retained for
  // it, e.g. by the prefix cache) holding their tokens' KV, with `pool_blocks` the same
  // positions' blocks of pools 1.. (a sliding pool's -1 where its window reads none;
  // PrefixCache::Hit), and for a model with recurrent state on the prefix cache's snapshot
  // `state_slot` of the state after them (copied). -1 as above, or when a pool's table is
  // missing or of another length; the blocks are released.
  int32_t open_sequence(std::vector<int32_t> prefix_blocks, int32_t state_slot = -1,
                        std::vector<std::vector<int32_t>> pool_blocks = {});
  // The prefix cache's side of a prompt (docs/ARCHITECTURE.md, "Prefix cache"): the next
  // length after `done` at which a prompt of `prompt_tokens` is offered to the cache (0:
  // none). Without recurrent state its end (its full blocks are kept); with it every
  // prefix_state_interval tokens and the last block boundary, where the sequence's state
  // is snapshotted, so prompt steps must end there (the scheduler cuts them).
  int64_t next_prefix_cache_point(int64_t prompt_tokens, int64_t done) const;
  // Offers `seq`'s blocks covering `tokens` (the sequence's first tokens) to the prefix
  // cache under namespace `ns`; with recurrent state the sequence must stand exactly at
  // tokens.size() (next_prefix_cache_point): its state is snapshotted with them. Returns
  // the tokens newly written to the cache (whole blocks the cache did not hold).
  int64_t cache_prefix(const std::string& ns, std::span<const int32_t> tokens, int32_t seq);
  // Whether open_sequence can succeed: always, unless every recurrent-state slot is
  // taken (admission waits on this; docs/ARCHITECTURE.md, "State manager").
  bool can_open_sequence() const;
  // A new sequence continuing `seq` identically: its KV blocks and recurrent state
  // (live and snapshot) copied. conflict when the KV cache or the state slots are full.
  Result<int32_t> fork_sequence(int32_t seq);
  // The plan declares RECURRENT state; its bytes on the backend (all slots, all layers).
  bool has_recurrent_state() const { return state_slots_.num_blocks() > 0; }
  // State slots per sequence for row snapshots (0: rollback replays the kept tokens).
  int64_t row_snapshots() const { return row_snapshots_; }
  // Rollbacks served by a row snapshot (no replay), since the engine opened.
  int64_t row_restores() const { return row_restores_; }
  uint64_t recurrent_state_bytes() const { return state_bytes_; }
  // The paged KV cache on the backend: K and V of every layer that keeps KV (each with its
  // state group's geometry and dtype), all blocks.
  uint64_t kv_cache_bytes() const { return kv_bytes_; }
  // K and V of one position in every layer that keeps KV (each layer's geometry and dtype).
  uint64_t kv_bytes_per_token() const { return kv_token_bytes_; }
  int32_t free_state_slots() const { return state_slots_.num_free(); }
  // Recurrent-state slots the prefix cache holds as snapshots (given up when sequences need them).
  int32_t cached_state_slots() const { return prefix_cache_.states(); }
  // A sequence's block table in a KV pool (-1 where a sliding pool dropped a block).
  const std::vector<int32_t>& sequence_blocks(int32_t seq, int32_t pool = 0) const;
  int64_t block_size() const { return block_size_; }
  PrefixCache& prefix_cache() { return prefix_cache_; }
  void close_sequence(int32_t seq);           // frees its KV blocks
  int64_t sequence_length(int32_t seq) const; // tokens in its KV cache
  // Drops a sequence's positions from `new_length` on (speculative rollback). With
  // recurrent state, new_length must lie within the last step: the state is restored to
  // the snapshot of the row it ends at when the step kept one (row snapshots), else to the
  // snapshot taken before that step and the kept tokens of it are replayed. With
  // sliding-window pools, new_length must not need a block the pool already dropped
  // (a rollback of up to EngineOptions::max_step_tokens positions never does).
  Status truncate_sequence(int32_t seq, int64_t new_length);
  // Copies one KV block's contents to another in every layer of a KV pool (on every
  // pipeline stage).
  Status copy_kv_block(int32_t pool, int32_t from, int32_t to);
  // The backend the model runs on (tests and tools read its name, description and stats).
  const backend::Backend& backend() const { return *backend_; }

  // Runs one forward pass over every request's new tokens; returns the logits rows
  // (all_logits: one per token, else one per request), request by request.
  Result<std::vector<std::vector<float>>> step(std::span<const StepRequest> requests);
  // step() that also samples: each request with a RowSampling gets its tokens, and its
  // logits rows only when it asks for them. On a backend that samples on its device
  // (CUDA, unless BackendOptions::device_sampling is off) the rows are sampled there; on
  // the CPU backend (and micro-batched steps) on the host, with the same canonical sampler.
  Result<std::vector<StepRows>> step_sampled(std::span<const StepRequest> requests);
  // step() whose rows are the final hidden states (after the final norm, no output
  // matmul; [hidden_width()] each) instead of logits: embeddings. Such a step asks for
  // no logits at all, and its rows never stay on the device. unsupported when
  // hidden_width() is 0.
  Result<std::vector<std::vector<float>>> step_hidden(std::span<const StepRequest> requests);
  // The draft head (EngineOptions::draft_head): its layers (0: none, or not enabled), why
  // the checkpoint has none when it declares one, and one draft-head step over every
  // request's rows. The head keeps KV in the sequence's own blocks (past its length while
  // drafting ahead) and never changes the sequence; its tokens only ever become drafts.
  int32_t draft_layers() const { return draft_head_ ? draft_layers_ : 0; }
  const std::string& draft_head_missing() const { return draft_missing_; }
  Result<std::vector<HeadRows>> step_head(std::span<const HeadRequest> requests);
  // Whether step_sampled samples on the device.
  bool samples_on_device() const { return backend_->samples_on_device(); }

  // Rolling steps (docs/ARCHITECTURE.md, "Pipeline stages"): step() in two halves, so
  // a pipeline keeps two groups of sequences in flight. step_issue(requests, slot)
  // queues the step in step slot 0 or 1 and returns before its logits exist where the
  // backend allows (a pipeline of CUDA stages: stage 0 may start this step while stage
  // 1 still runs the other slot's); other backends compute it at once. The sequences
  // advance at issue. step_collect waits and returns what step() would have. Collect a
  // slot's step before issuing the slot's next one; a step of the other slot (for
  // other sequences) may be issued in between.
  Result<std::unique_ptr<PendingStep>> step_issue(std::span<const StepRequest> requests, int32_t slot);
  Result<std::vector<std::vector<float>>> step_collect(PendingStep& step);
  // step_sampled in two halves, for rolling steps: on a backend that samples on its
  // device (a pipeline of CUDA stages: the last stage) the rows are sampled right after
  // the step (unless a request wants logits rows), and the tokens arrive with the step; elsewhere the rows
  // are sampled on the host at collect. `requests` (and what their RowSampling point
  // to) must stay valid until step_collect_sampled, which takes the same span.
  Result<std::unique_ptr<PendingStep>> step_issue_sampled(std::span<const StepRequest> requests, int32_t slot);
  Result<std::vector<StepRows>> step_collect_sampled(PendingStep& step, std::span<const StepRequest> requests);

 private:
  Engine(std::unique_ptr<ModelSource> source, int64_t vocab, int64_t max_context, int64_t block_size,
         const std::vector<int64_t>& pool_blocks, std::vector<int64_t> pool_window, int64_t max_step_tokens);
  struct Sequence {
    int64_t length = 0;
    std::vector<std::vector<int32_t>> blocks;  // per KV pool: the block of each position / block_size (-1: dropped)
    // Recurrent state: its slot, the snapshot taken before the last step (at
    // snapshot_length) and that step's tokens, which truncate_sequence replays.
    int32_t state_slot = -1, snapshot_slot = -1;
    int64_t snapshot_length = -1;
    std::vector<int32_t> since_snapshot;
    bool since_snapshot_prompt = false;
    // Row snapshots (EngineOptions::state_snapshot_rows): row_slots[i] holds the state after
    // the last step's row i, for i < rows_snapshotted.
    std::vector<int32_t> row_slots;
    int64_t rows_snapshotted = 0;
  };
  // step_issue with the rows' kind (memra_forward_batch.row_output).
  Result<std::unique_ptr<PendingStep>> issue(std::span<const StepRequest> requests, int32_t slot, int32_t row_output);
  Status copy_state_slot(int32_t from, int32_t to);
  // The rows of `r` that get a state snapshot (a generated multi-token step's, but the last).
  static size_t snapshot_row_count(const StepRequest& r, const Sequence& s);
  // Gives back a sequence's sliding-pool blocks that no step from `position` on reads.
  void drop_window_blocks(Sequence& s, int64_t position);
  // Releases the blocks a sequence holds past `keep` table entries, in every pool.
  void release_blocks_from(Sequence& s, size_t keep);
  Status reset_state_slot(int32_t slot);

  std::unique_ptr<ModelSource> source_;
  int64_t vocab_ = 0;
  int64_t hidden_width_ = 0;
  int32_t draft_layers_ = 0;   // the plan's draft-head layers (memra_plan_info.draft_layers)
  bool draft_head_ = false;    // ... and their KV allocated (EngineOptions::draft_head)
  std::string draft_missing_;  // why the checkpoint has no head (the plan description says)
  int64_t max_context_ = 0;
  int64_t block_size_ = 16;
  std::vector<KvBlockAllocator> pools_;  // per KV pool; never resized (prefix_cache_ points at them)
  std::vector<int64_t> pool_window_;     // per KV pool: its sliding window, 0 for full attention
  int64_t max_step_tokens_ = 512;
  PrefixCache prefix_cache_;
  KvBlockAllocator state_slots_{0};  // the sequences' recurrent-state slots (none without RECURRENT groups)
  KvBlockAllocator cache_states_{0}; // the prefix cache's snapshots: backend slots from cache_state_base()
  int64_t row_snapshots_ = 0;        // row snapshot slots per sequence (0: rollback replays)
  int64_t state_interval_ = 0;       // prefix-cache state snapshots every this many prompt tokens (0: none)
  int64_t row_restores_ = 0;         // truncate_sequence calls a row snapshot served
  int32_t cache_state_base() const { return state_slots_.num_blocks(); }
  uint64_t state_bytes_ = 0;
  uint64_t kv_bytes_ = 0;
  uint64_t kv_token_bytes_ = 0;
  std::unique_ptr<MemoryPlan> memory_plan_;
  std::unique_ptr<backend::Backend> backend_;
  std::vector<plugins::QuantPlugin> quant_plugins_;  // keep the libraries and tables alive
  std::vector<ops::PluginOp> plugin_ops_;            // the ops the family plugin brings (the backend holds them)
  std::map<std::string, backend::QuantTable> quant_tables_;
  std::unique_ptr<plugins::ModelPlan> plan_;
  std::vector<std::unique_ptr<plugins::Model>> models_;  // one per backend op table (Backend::op_tables)
  std::map<int32_t, Sequence> sequences_;
  int32_t next_seq_ = 0;
  bool keep_logits_on_device_ = false;  // step_issue: no host copy of the logits (step_sampled)
  struct DeviceSamples;
  std::unique_ptr<DeviceSamples> device_samples(std::span<const StepRequest> requests, const RowLayout& layout) const;
};

}  // namespace memra::engine
