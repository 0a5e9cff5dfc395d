// The pipeline's layer split: the memory-balanced split is the best contiguous split
// (checked against brute force over every split), explicit splits are honoured,
// degenerate ones (a stage with no layers, counts that do not add up, more stages
// than layers) are refused with a message that says so, and weights are placed on
// the stages that use them (tied embeddings on the first and the last).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <random>
#include <string>

#include "host/backend/pipeline/pipeline_split.hpp"

using memra::backend::PipelinePlan;
using memra::backend::PipelineSplitOptions;
using memra::backend::plan_pipeline;

namespace {

// A model's weight list with given per-layer bytes (names only matter, and bytes).
struct FakeModel {
  std::deque<std::string> names;
  std::vector<memra_weight> weights;
  void add(const std::string& name, uint64_t bytes) {
    names.push_back(name);
    memra_weight w{};
    w.struct_size = MEMRA_WEIGHT_STRUCT_SIZE;
    w.name = names.back().c_str();
    w.bytes = bytes;
    weights.push_back(w);
  }
};

FakeModel make_model(const std::vector<uint64_t>& layer_bytes, uint64_t embd, uint64_t head, bool tied) {
  FakeModel m;
  m.add("token_embd.weight", embd);
  for (size_t l = 0; l < layer_bytes.size(); ++l) {
    // Two tensors per layer, so the sum is what counts.
    m.add("blk." + std::to_string(l) + ".attn_q.weight", layer_bytes[l] / 2);
    m.add("blk." + std::to_string(l) + ".ffn_down.weight", layer_bytes[l] - layer_bytes[l] / 2);
  }
  m.add("output_norm.weight", 16);
  if (!tied) m.add("output.weight", head);
  return m;
}

uint64_t stage_total(const PipelinePlan& p, int32_t s) {
  return p.weight_bytes[static_cast<size_t>(s)] + p.kv_bytes[static_cast<size_t>(s)];
}

uint64_t max_stage(const PipelinePlan& p) {
  uint64_t m = 0;
  for (int32_t s = 0; s < p.stages(); ++s) m = std::max(m, stage_total(p, s));
  return m;
}

// Brute force: the smallest achievable largest stage over every contiguous split.
uint64_t best_by_brute_force(const FakeModel& m, int64_t layers, int32_t stages, const std::vector<uint64_t>& kv_per_layer) {
  uint64_t best = ~0ull;
  std::vector<int64_t> counts(static_cast<size_t>(stages), 1);
  // Enumerate compositions of `layers` into `stages` positive parts.
  std::function<void(int32_t, int64_t)> rec = [&](int32_t s, int64_t left) {
    if (s == stages - 1) {
      counts[static_cast<size_t>(s)] = left;
      PipelineSplitOptions o;
      o.stages = stages;
      o.split = counts;
      o.kv_bytes_per_layer = kv_per_layer;
      auto p = plan_pipeline(m.weights, layers, o);
      EXPECT_TRUE(p.ok());
      if (p) best = std::min(best, max_stage(*p));
      return;
    }
    for (int64_t c = 1; c <= left - (stages - 1 - s); ++c) {
      counts[static_cast<size_t>(s)] = c;
      rec(s + 1, left - c);
    }
  };
  rec(0, layers);
  return best;
}

}  // namespace

TEST(PipelineSplit, WeightLayerParsesBlockNames) {
  EXPECT_EQ(memra::backend::weight_layer("blk.0.attn_q.weight"), 0);
  EXPECT_EQ(memra::backend::weight_layer("blk.35.ffn_down.weight"), 35);
  EXPECT_EQ(memra::backend::weight_layer("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(memra::backend::weight_layer("blk.3"), -1);
  EXPECT_EQ(memra::backend::weight_layer("token_embd.weight"), -1);
  EXPECT_EQ(memra::backend::weight_layer("output.weight"), -1);
}

TEST(PipelineSplit, MemorySplitIsTheBestContiguousSplit) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint64_t> bytes(100, 1000);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t layers = 2 + trial % 9;
    const int32_t stages = 2 + trial % 3;
    if (layers < stages) continue;
    std::vector<uint64_t> lb;
    for (int64_t l = 0; l < layers; ++l) lb.push_back(bytes(rng));
    const bool tied = trial % 4 == 0;
    const FakeModel m = make_model(lb, bytes(rng) * 2, bytes(rng) * 3, tied);
    // KV per layer: none, or differing by layer (state groups of different geometry).
    std::vector<uint64_t> kv(static_cast<size_t>(layers), 0);
    if (trial % 2)
      for (size_t l = 0; l < kv.size(); ++l) kv[l] = 37 + 11 * (l % 3);
    PipelineSplitOptions o;
    o.stages = stages;
    o.kv_bytes_per_layer = kv;
    auto p = plan_pipeline(m.weights, layers, o);
    ASSERT_TRUE(p.ok()) << p.error().message;
    ASSERT_EQ(p->stages(), stages);
    int64_t covered = 0;
    for (int32_t s = 0; s < stages; ++s) {
      EXPECT_EQ(p->first_layer[static_cast<size_t>(s)], covered);
      EXPECT_GE(p->num_layers[static_cast<size_t>(s)], 1);
      covered += p->num_layers[static_cast<size_t>(s)];
    }
    EXPECT_EQ(covered, layers);
    EXPECT_EQ(max_stage(*p), best_by_brute_force(m, layers, stages, kv)) << "trial " << trial << ": " << p->describe();
  }
}

TEST(PipelineSplit, UniformLayersSplitEvenlyAndAHeavyHeadShiftsLayersForward) {
  const std::vector<uint64_t> lb(36, 400);
  // Embedding table == output head: 18/18.
  auto even = plan_pipeline(make_model(lb, 1200, 1200, false).weights, 36, {2, {}, {}});
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(even->num_layers, (std::vector<int64_t>{18, 18}));
  // The head three layers heavier than the table: stage 0 takes more layers.
  auto shifted = plan_pipeline(make_model(lb, 400, 1600, false).weights, 36, {2, {}, {}});
  ASSERT_TRUE(shifted.ok());
  EXPECT_GT(shifted->num_layers[0], 18);
  EXPECT_EQ(shifted->num_layers[0] + shifted->num_layers[1], 36);
}

TEST(PipelineSplit, ExplicitSplitsAreHonoured) {
  const FakeModel m = make_model(std::vector<uint64_t>(6, 100), 50, 50, false);
  auto a = plan_pipeline(m.weights, 6, {2, {1}, {}});  // N-1 entries: the rest to the last
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->num_layers, (std::vector<int64_t>{1, 5}));
  EXPECT_EQ(a->layer_stage, (std::vector<int32_t>{0, 1, 1, 1, 1, 1}));
  auto b = plan_pipeline(m.weights, 6, {3, {2, 3, 1}, {}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first_layer, (std::vector<int64_t>{0, 2, 5}));
}

TEST(PipelineSplit, DegenerateSplitsAreRefused) {
  const FakeModel m = make_model(std::vector<uint64_t>(4, 100), 50, 50, false);
  for (const std::vector<int64_t>& split : {std::vector<int64_t>{0}, std::vector<int64_t>{4}, std::vector<int64_t>{5},
                                            std::vector<int64_t>{-1}}) {
    auto p = plan_pipeline(m.weights, 4, {2, split, {}});
    ASSERT_FALSE(p.ok()) << "split " << split[0];
    EXPECT_NE(p.error().message.find("at least one layer"), std::string::npos) << p.error().message;
  }
  auto sum = plan_pipeline(m.weights, 4, {2, {1, 2}, {}});
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.error().message.find("covers 3 layers"), std::string::npos) << sum.error().message;
  auto count = plan_pipeline(m.weights, 4, {3, {1}, {}});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.error().message.find("give 2 or 3"), std::string::npos) << count.error().message;
  auto many = plan_pipeline(m.weights, 4, {5, {}, {}});
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.error().message.find("at least one layer"), std::string::npos) << many.error().message;
  auto zero_stage = plan_pipeline(m.weights, 4, {3, {2, 2, 0}, {}});
  ASSERT_FALSE(zero_stage.ok());
  EXPECT_NE(zero_stage.error().message.find("stage 2 would hold 0 layers"), std::string::npos) << zero_stage.error().message;
}

TEST(PipelineSplit, WeightsLiveWhereTheyAreUsed) {
  const FakeModel untied = make_model(std::vector<uint64_t>(4, 100), 50, 70, false);
  auto p = plan_pipeline(untied.weights, 4, {3, {1, 2, 1}, {}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->tied_output);
  EXPECT_EQ(p->weight_stages("token_embd.weight"), 1u);
  EXPECT_EQ(p->weight_stages("blk.0.attn_q.weight"), 1u);
  EXPECT_EQ(p->weight_stages("blk.1.attn_q.weight"), 2u);
  EXPECT_EQ(p->weight_stages("blk.2.ffn_down.weight"), 2u);
  EXPECT_EQ(p->weight_stages("blk.3.ffn_down.weight"), 4u);
  EXPECT_EQ(p->weight_stages("output_norm.weight"), 4u);
  EXPECT_EQ(p->weight_stages("output.weight"), 4u);
  EXPECT_EQ(p->weight_stages("rope_freqs.weight"), 7u);  // unknown: everywhere
  EXPECT_EQ(p->weight_bytes[0], 50u + 100u);
  EXPECT_EQ(p->weight_bytes[2], 100u + 70u + 16u);
  const FakeModel tied = make_model(std::vector<uint64_t>(4, 100), 50, 0, true);
  auto t = plan_pipeline(tied.weights, 4, {2, {}, {}});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->tied_output);
  EXPECT_EQ(t->weight_stages("token_embd.weight"), 3u);  // the lookup on stage 0, the head on stage 1
}

