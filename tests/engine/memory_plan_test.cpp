// The memory plan's arithmetic (host/engine/memory_plan.hpp) on fake device descriptions:
// an 80 GB H100 serving the Qwen3-8B shape, a 24 GB card that cannot hold the Qwen3.5-27B
// hybrid's full context, the settings that override it, and the refusals with their numbers.
#include <gtest/gtest.h>

#include <cmath>

#include "host/engine/memory_plan.hpp"

namespace memra::engine {
namespace {

constexpr uint64_t GiB = uint64_t{1} << 30;

// K and V of one block of 16 positions over `layers` layers of `kv_heads` x `head_dim` f16.
uint64_t block_bytes(uint64_t layers, uint64_t kv_heads, uint64_t head_dim) { return 2 * layers * kv_heads * head_dim * 2 * 16; }

// The 8B shape on an H100: 36 layers of 8 KV heads of 128 (144.0 KiB a token), 40,960
// positions, 5 GiB of q4_k weights, 1.5 GiB of dry-step workspace, 0.5 GiB of driver.
MemoryPlanInput h100_qwen3_8b() {
  MemoryPlanInput in;
  in.device = "NVIDIA H100 80GB HBM3 (cuda:0)";
  in.total = 80 * GiB;
  in.weights = 5 * GiB;
  in.workspace = 3 * GiB / 2;
  in.probe_state = 512 / 16 * block_bytes(36, 8, 128);
  in.free = in.total - in.weights - in.workspace - GiB / 2 - in.probe_state;
  in.reserve = in.total / 100;
  in.model_positions = 40960;
  in.sequences = 16;
  in.pool_window = {0};
  in.pool_block_bytes = {block_bytes(36, 8, 128)};
  return in;
}

// The Qwen3.5-27B hybrid (16 attention layers of 4 KV heads of 256; 48 DeltaNet layers of
// ~3.2 MiB of state each; 262,144 positions) in 17 GiB of weights on a 24 GiB card.
MemoryPlanInput small_card_hybrid() {
  MemoryPlanInput in;
  in.device = "RTX 4090 (cuda:0)";
  in.total = 24 * GiB;
  in.weights = 17 * GiB;
  in.workspace = GiB;
  in.free = in.total - in.weights - in.workspace - GiB / 4;
  in.reserve = in.total / 100;
  in.model_positions = 262144;
  in.pool_window = {0};
  in.pool_block_bytes = {block_bytes(16, 4, 256)};
  in.state_slot_bytes = 48 * (48 * 128 * 128 * 4 + 3 * 8192 * 2);
  in.state_slots_per_sequence = 3;  // live, before the step, the prefix cache's snapshot
  return in;
}

uint64_t budget_of(const MemoryPlanInput& in) {
  const uint64_t used = in.total - in.free - in.probe_state;
  return static_cast<uint64_t>(in.fraction * static_cast<double>(in.total)) - used - in.reserve;
}

TEST(MemoryPlan, AnH100GivesTheEightBModelItsFullContextAndTheRestToTheKvCache) {
  const MemoryPlanInput in = h100_qwen3_8b();
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->context, 40960);
  EXPECT_FALSE(plan->context_reduced);
  EXPECT_EQ(plan->budget, budget_of(in));
  // 40,960 positions are 2,560 blocks; the budget holds budget / (2,560 blocks) sequences of them.
  const double sequences = static_cast<double>(budget_of(in)) / static_cast<double>(2560 * block_bytes(36, 8, 128));
  ASSERT_GT(sequences, 10.0);
  ASSERT_LT(sequences, 16.0);
  ASSERT_EQ(plan->pool_blocks.size(), 1u);
  EXPECT_EQ(plan->pool_blocks[0], static_cast<int64_t>(std::floor(2560 * sequences)));
  EXPECT_EQ(plan->kv_tokens, plan->pool_blocks[0] * 16);
  EXPECT_LE(plan->kv_bytes, plan->budget);
  EXPECT_GT(plan->kv_bytes, plan->budget - block_bytes(36, 8, 128));  // all of it, to a block
  EXPECT_EQ(plan->state_bytes, 0u);
  // The block shows the arithmetic.
  ASSERT_GE(plan->lines.size(), 4u);
  EXPECT_NE(plan->lines[0].find("80.0 GiB, 90 % for memra = 72.0 GiB"), std::string::npos) << plan->lines[0];
  EXPECT_NE(plan->lines[1].find("weights 5.0 GiB, dry-step workspace 1.5 GiB"), std::string::npos) << plan->lines[1];
  EXPECT_NE(plan->lines[2].find("144.0 KiB a token"), std::string::npos) << plan->lines[2];
  EXPECT_NE(plan->lines.back().find("context 40960 tokens (the model's positions)"), std::string::npos) << plan->lines.back();
  // docs/SERVING.md ("Memory plan") shows this block.
  EXPECT_EQ(plan->lines[2], "  KV cache 64.2 GiB: 467488 tokens (29218 blocks of 16, 144.0 KiB a token) = 11.4 sequences at full context");
  EXPECT_EQ(plan->lines[1], "  weights 5.0 GiB, dry-step workspace 1.5 GiB, other 512.0 MiB, CUDA graphs 819.2 MiB -> 64.2 GiB for the KV cache and state");
}

TEST(MemoryPlan, KvCacheStopsAtTheSequencesThatRunAtOnce) {
  MemoryPlanInput in = h100_qwen3_8b();
  in.sequences = 4;  // --max-running 4: four contexts are all the scheduler can use
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->pool_blocks[0], 4 * 2560);
  EXPECT_LT(plan->kv_bytes, plan->budget / 2);
}

TEST(MemoryPlan, ASmallCardGetsTheLongestContextThatFitsAndSaysSo) {
  const MemoryPlanInput in = small_card_hybrid();
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_TRUE(plan->context_reduced);
  const uint64_t state_seq = 3 * in.state_slot_bytes;
  auto one = [&](int64_t tokens) { return static_cast<uint64_t>((tokens + 15) / 16) * block_bytes(16, 4, 256) + state_seq; };
  EXPECT_EQ(plan->context % 16, 0);
  EXPECT_LE(one(plan->context), budget_of(in));
  EXPECT_GT(one(plan->context + 16), budget_of(in));  // the longest that fits
  EXPECT_LT(plan->context, 262144);
  EXPECT_EQ(plan->sequences, 1);  // nothing is left for a second sequence's state
  EXPECT_EQ(plan->state_bytes, state_seq);
  EXPECT_NE(plan->lines.back().find("REDUCED from the model's 262144"), std::string::npos) << plan->lines.back();
  EXPECT_NE(plan->lines[3].find("recurrent state"), std::string::npos) << plan->lines[3];
}

TEST(MemoryPlan, RecurrentStateTakesAsManySequencesAsRunAndTheKvCacheTheRest) {
  MemoryPlanInput in = small_card_hybrid();
  in.total = 80 * GiB;
  in.free = in.total - in.weights - in.workspace - GiB / 4;
  in.reserve = in.total / 100;
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->context, 262144);
  EXPECT_EQ(plan->sequences, 16);
  EXPECT_EQ(plan->state_bytes, 16 * 3 * in.state_slot_bytes);
  const uint64_t kv_budget = budget_of(in) - plan->state_bytes;
  EXPECT_EQ(plan->pool_blocks[0], static_cast<int64_t>(kv_budget / block_bytes(16, 4, 256)));
}

TEST(MemoryPlan, SettingsOverrideThePlanWhereTheyFit) {
  MemoryPlanInput in = h100_qwen3_8b();
  in.max_context = 8192;
  in.kv_cache_tokens = 100000;  // 13 contexts of 8,192
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->context, 8192);
  EXPECT_EQ(plan->pool_blocks[0], 13 * 512);
  EXPECT_NE(plan->lines.back().find("--max-context"), std::string::npos);
}

TEST(MemoryPlan, SlidingPoolsKeepTheirWindows) {
  MemoryPlanInput in = h100_qwen3_8b();
  in.pool_window = {0, 1024};
  in.pool_block_bytes = {block_bytes(6, 8, 128), block_bytes(30, 8, 128)};
  in.sequences = 2;
  auto plan = plan_memory(in);
  ASSERT_TRUE(plan) << plan.error().message;
  // A sliding pool keeps the window, the rollback margin and one step: (1024 + 2 x 512 - 2) / 16 + 2 blocks.
  EXPECT_EQ(plan->pool_blocks, (std::vector<int64_t>{2 * 2560, 2 * ((1024 + 1024 - 2) / 16 + 2)}));
}

TEST(MemoryPlan, RefusesWhatCannotFitWithTheNumbersAndWhatToChange) {
  MemoryPlanInput in = h100_qwen3_8b();
  for (double bad : {0.0, -0.5, 1.5}) {
    in.fraction = bad;
    auto plan = plan_memory(in);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("--gpu-memory-fraction must lie in (0, 1]"), std::string::npos) << plan.error().message;
  }
  in.fraction = 0.08;  // 6.4 GiB: less than the weights and workspace
  auto none = plan_memory(in);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("leaves nothing for its KV cache"), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find("raise --gpu-memory-fraction"), std::string::npos);

  in = small_card_hybrid();
  in.max_context = 262144;
  auto big = plan_memory(in);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("one sequence of 262144 tokens needs 16.4 GiB"), std::string::npos) << big.error().message;
  EXPECT_NE(big.error().message.find("lower --max-context"), std::string::npos);

  in = h100_qwen3_8b();
  in.kv_cache_tokens = 40960 * 64;
  auto many = plan_memory(in);
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("--kv-cache-tokens 2621440 (64 sequences of 40960 tokens) needs 360.0 GiB"), std::string::npos)
      << many.error().message;
}

}  // namespace
}  // namespace memra::engine
