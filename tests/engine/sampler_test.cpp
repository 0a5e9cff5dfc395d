// Sampler: Philox known answers, determinism keyed by (seed, position), and each
// filter's effect checked against a direct computation of the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "host/engine/philox.hpp"
#include "host/engine/sampler.hpp"

using memra::engine::SamplingParams;

TEST(EngineSampler, PhiloxMatchesRandom123KnownAnswers) {
  // Random123's published kat_vectors for philox4x32-10.
  EXPECT_EQ(memra::engine::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(memra::engine::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                         {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(EngineSampler, GreedyIsArgmaxLowestIdOnTies) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(memra::engine::sample(logits, p, 0, {}, {}).token, 1);
}

TEST(EngineSampler, DrawDependsOnlyOnSeedAndPosition) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  SamplingParams p;
  p.seed = 42;
  std::vector<int32_t> a, b;
  for (uint64_t pos = 0; pos < 50; ++pos) a.push_back(memra::engine::sample(logits, p, pos, {}, {}).token);
  // Same positions in another order give the same tokens.
  for (uint64_t pos = 50; pos-- > 0;) b.insert(b.begin(), memra::engine::sample(logits, p, pos, {}, {}).token);
  EXPECT_EQ(a, b);
  p.seed = 43;
  int differ = 0;
  for (uint64_t pos = 0; pos < 50; ++pos) differ += memra::engine::sample(logits, p, pos, {}, {}).token != a[pos];
  EXPECT_GT(differ, 0);
}

TEST(EngineSampler, FrequenciesFollowTheSoftmax) {
  std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
  SamplingParams p;
  p.temperature = 0.7f;
  p.seed = 7;
  const int n = 40000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(memra::engine::sample(logits, p, static_cast<uint64_t>(i), {}, {}).token)];
  double z = 0;
  for (float l : logits) z += std::exp(l / 0.7);
  for (size_t i = 0; i < 4; ++i) {
    const double expected = std::exp(logits[i] / 0.7) / z;
    EXPECT_NEAR(counts[i] / static_cast<double>(n), expected, 0.01) << "token " << i;
  }
}

TEST(EngineSampler, TopKTopPMinPRestrictTheSupport) {
  std::vector<float> logits = {3.0f, 2.0f, 1.0f, 0.0f, -1.0f};
  auto support = [&](SamplingParams p) {
    std::map<int32_t, int> seen;
    for (int i = 0; i < 3000; ++i) ++seen[memra::engine::sample(logits, p, static_cast<uint64_t>(i), {}, {}).token];
    return seen;
  };
  SamplingParams k;
  k.top_k = 2;
  auto s = support(k);
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.count(0) && s.count(1));
  // softmax(3,2,1,0,-1) ≈ .636 .234 .086 .032 .012: top_p .8 keeps the first two.
  SamplingParams tp;
  tp.top_p = 0.8f;
  EXPECT_EQ(support(tp).size(), 2u);
  // min_p .3: keeps p >= .3*.636 = .19 → the first two.
  SamplingParams mp;
  mp.min_p = 0.3f;
  EXPECT_EQ(support(mp).size(), 2u);
}

TEST(EngineSampler, PenaltiesShiftTheChoice) {
  std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  std::vector<int32_t> out = {0, 0};
  p.frequency_penalty = 0.1f;  // 2.0 - 0.2 = 1.8 < 1.9
  EXPECT_EQ(memra::engine::sample(logits, p, 2, {}, out).token, 1);
  SamplingParams r;
  r.temperature = 0.0f;
  r.repetition_penalty = 1.1f;  // 2.0 / 1.1 = 1.82 < 1.9
  std::vector<int32_t> prompt = {0};
  EXPECT_EQ(memra::engine::sample(logits, r, 1, prompt, {}).token, 1);
}

TEST(EngineSampler, LogprobsAreTheRawLogSoftmax) {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 2;
  const auto r = memra::engine::sample(logits, p, 0, {}, {});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_EQ(r.token, 2);
  EXPECT_NEAR(r.logprob, 3.0 - lse, 1e-6);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].id, 2);
  EXPECT_EQ(r.top[1].id, 1);
  EXPECT_NEAR(r.top[1].logprob, 2.0 - lse, 1e-6);
}

TEST(EngineSampler, ValidateRejectsOutOfRange) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_TRUE(memra::engine::validate(p).has_value());
  p = {};
  p.temperature = -1.0f;
  EXPECT_TRUE(memra::engine::validate(p).has_value());
  p = {};
  EXPECT_FALSE(memra::engine::validate(p).has_value());
}
