// The memory plan (docs/SERVING.md, "Memory plan"): what a model's context and KV /
// recurrent-state cache get, from the device's memory as it stands once the weights are
// up and a dry step at the largest step size has run. Pure arithmetic over a device
// description, so CPU tests plan for an H100 or a 24 GB card with fake numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/result.hpp"

namespace memra::engine {

struct MemoryPlanInput {
  // The device, as measured with the weights, the dry step's workspace and the probe state
  // (below) in place.
  std::string device;
  uint64_t total = 0;
  uint64_t free = 0;
  uint64_t probe_state = 0;  // bytes of the probe's KV / state counted as used in `free` (given back first)
  // What the block reports (already inside total - free) and what is kept back besides.
  uint64_t weights = 0;
  uint64_t workspace = 0;    // the dry step's peak scratch (0 where not measured)
  uint64_t reserve = 0;      // CUDA graphs and headroom, not yet allocated
  double fraction = 0.9;     // of the device's memory the server may hold in all
  // The model and the settings.
  int64_t model_positions = 0;  // max_position_embeddings (0: unknown)
  int64_t max_context = 0;      // --max-context (0: the model's positions when one sequence of them fits)
  int64_t kv_cache_tokens = 0;  // --kv-cache-tokens (0: from the budget)
  int64_t sequences = 16;       // the most sequences that run at once (--max-running)
  int64_t block_size = 16;
  int64_t max_step = 512;       // the most tokens one step adds to a sequence
  std::vector<int64_t> pool_window;       // per KV pool: its sliding window (0: full attention)
  std::vector<uint64_t> pool_block_bytes; // per KV pool: K and V of one block, every layer of the pool
  uint64_t state_slot_bytes = 0;          // one recurrent-state slot, every layer (0: no recurrent state)
  int64_t state_slots_per_sequence = 0;   // slots each sequence brings (live, snapshot, rows, prefix cache)
  int64_t state_fixed_slots = 0;          // slots the prefix cache holds whatever the sequence count
};

struct MemoryPlan {
  int64_t context = 0;             // tokens per sequence
  bool context_reduced = false;    // below the model's positions because one sequence of them does not fit
  int64_t sequences = 0;           // sequences the recurrent state is sized for (the KV cache's unit otherwise)
  std::vector<int64_t> pool_blocks;  // per KV pool
  uint64_t budget = 0;             // what the KV cache and the state may take
  uint64_t kv_bytes = 0;
  uint64_t state_bytes = 0;
  int64_t kv_tokens = 0;           // pool 0's blocks x block size
  std::vector<std::string> lines;  // the plan block, one line each, as printed at load
  MemoryPlanInput input;           // what it was planned from
};

// The KV blocks of each pool one sequence of `tokens` tokens holds at most (a sliding pool:
// its window, the rollback margin and one step's tokens).
std::vector<int64_t> blocks_per_sequence(const std::vector<int64_t>& windows, int64_t tokens, int64_t step, int64_t block);

// invalid_argument with the numbers (needed vs available) and what to change when the
// settings cannot fit one sequence of the context; out of range fraction likewise.
Result<MemoryPlan> plan_memory(const MemoryPlanInput& in);

}  // namespace memra::engine
