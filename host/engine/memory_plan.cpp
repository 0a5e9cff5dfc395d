#include "host/engine/memory_plan.hpp"

#include "core/common/human_bytes.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace memra::engine {

std::vector<int64_t> blocks_per_sequence(const std::vector<int64_t>& windows, int64_t tokens, int64_t step, int64_t block) {
  const int64_t all = (tokens + block - 1) / block;
  std::vector<int64_t> need;
  for (int64_t w : windows) need.push_back(w > 0 ? std::min(all, (w + 2 * step - 2) / block + 2) : all);
  return need;
}


namespace {

uint64_t sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

Result<MemoryPlan> plan_memory(const MemoryPlanInput& in) {
  if (!(in.fraction > 0.0 && in.fraction <= 1.0))
    return make_error(ErrorCode::invalid_argument, "--gpu-memory-fraction must lie in (0, 1]; got " + std::to_string(in.fraction));
  if (in.pool_window.size() != in.pool_block_bytes.size() || in.block_size <= 0 || in.sequences < 1)
    return make_error(ErrorCode::invalid_argument, "memory plan: bad KV geometry");
  const uint64_t used = sub0(sub0(in.total, in.free), in.probe_state);  // weights, workspace, driver, other processes
  const uint64_t cap = static_cast<uint64_t>(in.fraction * static_cast<double>(in.total));
  const std::string where = human_bytes(cap) + " (" + std::to_string(static_cast<int>(std::lround(in.fraction * 100))) +
                            " % of " + in.device + "'s " + human_bytes(in.total) + ") less the " + human_bytes(used) +
                            " in use after the weights and a dry step" +
                            (in.reserve ? " and " + human_bytes(in.reserve) + " kept back for CUDA graphs" : std::string());
  if (used + in.reserve >= cap)
    return make_error(ErrorCode::invalid_argument, "the model leaves nothing for its KV cache: " + where +
                                                       "; raise --gpu-memory-fraction, free the device, or use a smaller quant");
  MemoryPlan plan;
  plan.input = in;
  plan.budget = cap - used - in.reserve;

  auto seq_kv = [&](int64_t tokens) {
    const std::vector<int64_t> b = blocks_per_sequence(in.pool_window, tokens, std::max<int64_t>(1, in.max_step), in.block_size);
    uint64_t n = 0;
    for (size_t p = 0; p < b.size(); ++p) n += static_cast<uint64_t>(b[p]) * in.pool_block_bytes[p];
    return n;
  };
  const uint64_t state_seq = in.state_slot_bytes * static_cast<uint64_t>(std::max<int64_t>(0, in.state_slots_per_sequence));
  const uint64_t state_fixed = in.state_slot_bytes * static_cast<uint64_t>(std::max<int64_t>(0, in.state_fixed_slots));
  auto one = [&](int64_t tokens) { return seq_kv(tokens) + state_seq + state_fixed; };
  const int64_t positions = in.model_positions > 0 ? in.model_positions : 4096;
  const auto too_small = [&](int64_t tokens, const std::string& change) {
    return make_error(ErrorCode::invalid_argument, "one sequence of " + std::to_string(tokens) + " tokens needs " +
                                                       human_bytes(one(tokens)) + " of KV cache and state, but " +
                                                       human_bytes(plan.budget) + " is available: " + where + "; " + change);
  };

  // The context: the model's positions when one sequence of them fits, else the longest that does.
  if (in.max_context > 0) {
    plan.context = in.max_context;
    if (one(plan.context) > plan.budget)
      return too_small(plan.context, "lower --max-context, raise --gpu-memory-fraction or use --kv-dtype fp8");
  } else if (one(positions) <= plan.budget) {
    plan.context = positions;
  } else {
    if (one(in.block_size) > plan.budget)
      return too_small(in.block_size, "raise --gpu-memory-fraction, free the device, or use a smaller quant");
    int64_t lo = 1, hi = positions / in.block_size;  // whole blocks: lo fits, hi does not
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (one(mid * in.block_size) <= plan.budget ? lo : hi) = mid;
    }
    plan.context = lo * in.block_size;
    plan.context_reduced = true;
  }

  // Sequences: the state for as many as run at once (or fit), the KV cache for as many at
  // full context as the rest holds, at most that many (the scheduler never runs more).
  const uint64_t kv_one = seq_kv(plan.context);
  double kv_sequences = 0;
  if (in.kv_cache_tokens > 0) {
    plan.sequences = std::max<int64_t>(1, (in.kv_cache_tokens + plan.context - 1) / plan.context);
    const uint64_t need = static_cast<uint64_t>(plan.sequences) * (kv_one + state_seq) + state_fixed;
    if (need > plan.budget)
      return make_error(ErrorCode::invalid_argument, "--kv-cache-tokens " + std::to_string(in.kv_cache_tokens) + " (" +
                                                         std::to_string(plan.sequences) + " sequences of " +
                                                         std::to_string(plan.context) + " tokens) needs " + human_bytes(need) +
                                                         ", but " + human_bytes(plan.budget) + " is available: " + where +
                                                         "; lower --kv-cache-tokens or --max-context");
    kv_sequences = static_cast<double>(plan.sequences);
  } else {
    plan.sequences = in.sequences;
    if (state_seq > 0)
      plan.sequences = std::min<int64_t>(in.sequences, 1 + static_cast<int64_t>((plan.budget - one(plan.context)) / state_seq));
    const uint64_t kv_budget = plan.budget - state_fixed - static_cast<uint64_t>(plan.sequences) * state_seq;
    kv_sequences = std::min(static_cast<double>(plan.sequences),
                            kv_one ? static_cast<double>(kv_budget) / static_cast<double>(kv_one) : static_cast<double>(plan.sequences));
  }
  const std::vector<int64_t> per = blocks_per_sequence(in.pool_window, plan.context, std::max<int64_t>(1, in.max_step), in.block_size);
  for (size_t p = 0; p < per.size(); ++p) {
    const int64_t n = std::max<int64_t>(per[p], static_cast<int64_t>(std::floor(static_cast<double>(per[p]) * kv_sequences)));
    plan.pool_blocks.push_back(n);
    plan.kv_bytes += static_cast<uint64_t>(n) * in.pool_block_bytes[p];
  }
  plan.state_bytes = static_cast<uint64_t>(plan.sequences) * state_seq + state_fixed;
  plan.kv_tokens = plan.pool_blocks.empty() ? 0 : plan.pool_blocks[0] * in.block_size;

  // The block printed at load.
  auto& l = plan.lines;
  l.push_back("memory plan on " + in.device + ": " + human_bytes(in.total) + ", " +
              std::to_string(static_cast<int>(std::lround(in.fraction * 100))) + " % for memra = " + human_bytes(cap));
  l.push_back("  weights " + human_bytes(in.weights) + ", dry-step workspace " + human_bytes(in.workspace) + ", other " +
              human_bytes(sub0(used, in.weights + in.workspace)) + (in.reserve ? ", CUDA graphs " + human_bytes(in.reserve) : std::string()) +
              " -> " + human_bytes(plan.budget) + " for the KV cache and state");
  char seqs[32];
  std::snprintf(seqs, sizeof seqs, "%.1f", kv_sequences);
  l.push_back("  KV cache " + human_bytes(plan.kv_bytes) + ": " + std::to_string(plan.kv_tokens) + " tokens (" +
              (plan.pool_blocks.empty() ? std::string("0") : std::to_string(plan.pool_blocks[0])) + " blocks of " +
              std::to_string(in.block_size) + ", " + human_bytes(kv_one / static_cast<uint64_t>(std::max<int64_t>(1, plan.context))) +
              " a token) = " + seqs + " sequences at full context" +
              (in.kv_cache_tokens > 0 ? " (--kv-cache-tokens)" : std::string()));
  if (plan.state_bytes > 0)
    l.push_back("  recurrent state " + human_bytes(plan.state_bytes) + ": " + std::to_string(plan.sequences) + " sequences x " +
                human_bytes(state_seq) + (state_fixed ? " + " + human_bytes(state_fixed) + " of prefix-cache snapshots" : std::string()));
  std::string ctx = "  context " + std::to_string(plan.context) + " tokens";
  if (in.max_context > 0) ctx += " (--max-context; the model's " + std::to_string(positions) + ")";
  else if (plan.context_reduced)
    ctx += " -- REDUCED from the model's " + std::to_string(positions) + ": one sequence of them needs " + human_bytes(one(positions)) +
           "; raise --gpu-memory-fraction, use --kv-dtype fp8 or a smaller quant";
  else ctx += in.model_positions > 0 ? " (the model's positions)" : " (the model states no positions)";
  l.push_back(ctx);
  return plan;
}

}  // namespace memra::engine
