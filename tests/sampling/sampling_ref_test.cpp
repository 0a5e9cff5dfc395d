// The canonical sampler (kernels/sampling/sampling_ref): greedy and top-k ties, the
// top-p tie rule, min-p, seeded draws (reproducible, and distributed as the exact
// canonical probabilities: chi-square), memra_exp against std::exp, and the shared
// Philox against host/engine/philox.hpp and Random123's known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "host/engine/philox.hpp"
#include "host/engine/sampler.hpp"
#include "kernels/sampling/sampling_ref.hpp"

namespace {

using memra::sampling::PenaltyEntry;
using memra::sampling::RowParams;

RowParams params(float temperature = 1.0f, int32_t top_k = 0, float top_p = 1.0f, float min_p = 0.0f,
                 uint64_t seed = 1, uint64_t position = 0) {
  RowParams p{};
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = 1.0f;
  p.seed = seed;
  p.position = position;
  return p;
}

int32_t draw(const std::vector<float>& x, RowParams p, memra::ref::SampleTrace* t = nullptr) {
  return memra::ref::sample_row(x.data(), static_cast<int64_t>(x.size()), p, nullptr, 0, t);
}

// Ids a parameter set can draw (over many positions).
std::set<int32_t> support(const std::vector<float>& x, RowParams p, int draws = 2000) {
  std::set<int32_t> s;
  for (int i = 0; i < draws; ++i) {
    p.position = static_cast<uint64_t>(i);
    s.insert(draw(x, p));
  }
  return s;
}

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = INT32_MIN - ia;
  if (ib < 0) ib = INT32_MIN - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

}  // namespace

TEST(SamplingRef, GreedyLowestIdWinsTiesAndNanIsNeverBest) {
  EXPECT_EQ(draw({0.1f, 2.0f, -1.0f, 2.0f}, params(0.0f)), 1);
  EXPECT_EQ(draw({NAN, -5.0f, NAN}, params(0.0f)), 1);
  EXPECT_EQ(draw({-0.0f, 0.0f}, params(0.0f)), 0);  // -0 == +0: a tie
  std::vector<float> all(3000, -INFINITY);
  EXPECT_EQ(draw(all, params(0.0f)), 0);
}

TEST(SamplingRef, TopKTiesTakeAscendingIds) {
  // Values 5, then six ties at 3: top_k = 3 keeps id 4 and the two lowest tied ids.
  std::vector<float> x = {3, 3, 1, 3, 5, 3, 3, 3};
  EXPECT_EQ(support(x, params(1.0f, 3)), (std::set<int32_t>{0, 1, 4}));
  EXPECT_EQ(support(x, params(1.0f, 1)), (std::set<int32_t>{4}));
  EXPECT_EQ(support(x, params(1.0f, 8)).size(), 8u);
  // Ties spread over several lanes of a long row.
  std::vector<float> y(5000, 0.0f);
  for (int i : {4000, 17, 2100, 3333}) y[static_cast<size_t>(i)] = 1.0f;
  EXPECT_EQ(support(y, params(1.0f, 2)), (std::set<int32_t>{17, 2100}));
}

TEST(SamplingRef, TopPKeepsEveryTieAtTheThreshold) {
  // Weights 1, e^-1 x3 (ties), e^-3: top_p just above the first weight's share needs one
  // more token, and the tie rule brings in all three ties.
  std::vector<float> x = {0.0f, -1.0f, -1.0f, -3.0f, -1.0f};
  const float share = 1.0f / (1.0f + 3.0f * std::exp(-1.0f) + std::exp(-3.0f));
  EXPECT_EQ(support(x, params(1.0f, 0, share + 0.01f)), (std::set<int32_t>{0, 1, 2, 4}));
  EXPECT_EQ(support(x, params(1.0f, 0, share * 0.5f)), (std::set<int32_t>{0}));
  EXPECT_EQ(support(x, params(1.0f, 0, 0.999f)).size(), 5u);
  memra::ref::SampleTrace t;
  draw(x, params(1.0f, 0, share + 0.01f), &t);
  EXPECT_EQ(t.tau, t.weight[1]);
  // tau is the largest threshold that still covers top_p of the candidates' total.
  memra::ref::SampleTrace all;
  draw(x, params(1.0f), &all);
  const float target = (share + 0.01f) * all.total;
  EXPECT_GE(memra::ref::canonical_sum(all.weight.data(), 5, t.tau), target);
  EXPECT_LT(memra::ref::canonical_sum(all.weight.data(), 5, std::nextafter(t.tau, 2.0f)), target);
}

TEST(SamplingRef, MinPKeepsWeightsAtLeastMinP) {
  std::vector<float> x = {0.0f, std::log(0.5f), std::log(0.25f), std::log(0.1f)};
  EXPECT_EQ(support(x, params(1.0f, 0, 1.0f, 0.24f)), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(support(x, params(1.0f, 0, 1.0f, 0.6f)), (std::set<int32_t>{0}));
  EXPECT_EQ(support(x, params(1.0f, 0, 1.0f, 1.0f)), (std::set<int32_t>{0}));
  EXPECT_EQ(support(x, params(1.0f, 0, 1.0f, 0.05f)).size(), 4u);
}

TEST(SamplingRef, AdversarialRowsAreHandled) {
  std::vector<float> inf = {1.0f, INFINITY, 3.0f, INFINITY};
  EXPECT_EQ(support(inf, params(0.7f)), (std::set<int32_t>{1, 3}));
  std::vector<float> neg(10, -INFINITY);
  EXPECT_EQ(support(neg, params(1.0f)).size(), 10u);  // all equal: uniform
  std::vector<float> huge = {3e38f, -3e38f, 3e38f, 1.0f};
  EXPECT_EQ(support(huge, params(100.0f)), (std::set<int32_t>{0, 2}));
  std::vector<float> nan = {NAN, 0.0f, NAN};
  EXPECT_EQ(support(nan, params(1.0f)), (std::set<int32_t>{1}));
  // A tiny temperature: (x - mx) / T overflows to -inf, so only the maximum is left.
  std::vector<float> tiny_t = {0.0f, -1e-3f, 1e-3f};
  EXPECT_EQ(support(tiny_t, params(1e-30f)), (std::set<int32_t>{2}));
}

TEST(SamplingRef, DrawsDependOnlyOnSeedAndPosition) {
  std::vector<float> x(3000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  std::vector<int32_t> a, b;
  for (uint64_t pos = 0; pos < 64; ++pos) a.push_back(draw(x, params(0.8f, 0, 0.9f, 0.0f, 42, pos)));
  for (uint64_t pos = 64; pos-- > 0;) b.insert(b.begin(), draw(x, params(0.8f, 0, 0.9f, 0.0f, 42, pos)));
  EXPECT_EQ(a, b);
  int differ = 0;
  for (uint64_t pos = 0; pos < 64; ++pos) differ += draw(x, params(0.8f, 0, 0.9f, 0.0f, 43, pos)) != a[pos];
  EXPECT_GT(differ, 10);
}

// Chi-square of many positions' draws against the exact canonical probabilities
// (each survivor's weight over the total), for several parameter sets.
TEST(SamplingRef, DrawsFollowTheCanonicalProbabilities) {
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  std::vector<float> x(37);
  for (float& v : x) v = nd(gen);
  x[3] = x[20];  // a tie
  const RowParams sets[] = {params(1.0f), params(0.6f, 10), params(1.3f, 0, 0.8f), params(0.9f, 0, 1.0f, 0.05f),
                            params(1.0f, 20, 0.9f, 0.02f)};
  for (const RowParams& base : sets) {
    memra::ref::SampleTrace t;
    draw(x, base, &t);
    const int n = 100000;
    std::vector<int> counts(x.size(), 0);
    RowParams p = base;
    p.seed = 99;
    for (int i = 0; i < n; ++i) {
      p.position = static_cast<uint64_t>(i);
      ++counts[static_cast<size_t>(draw(x, p))];
    }
    double chi2 = 0;
    int dof = -1;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = n * static_cast<double>(t.weight[i]) / t.total;
      if (t.weight[i] == 0.0f) {
        EXPECT_EQ(counts[i], 0) << "id " << i << " is not a survivor";
        continue;
      }
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
      ++dof;
    }
    ASSERT_GT(dof, 0);
    // Mean dof, sd sqrt(2 dof): 6 sd is a bound a correct sampler misses ~never.
    EXPECT_LT(chi2, dof + 6.0 * std::sqrt(2.0 * dof)) << "temperature " << base.temperature << " top_k " << base.top_k
                                                      << " top_p " << base.top_p << " min_p " << base.min_p;
  }
}

TEST(SamplingRef, MemraExpWithinTwoUlpOfStdExp) {
  int64_t worst = 0;
  float worst_x = 0;
  // Every 97th float bit pattern in [-104, 88.7], plus the range ends.
  auto check = [&](float x) {
    const float got = memra::sampling::memra_exp(x);
    const double want = std::exp(static_cast<double>(x));
    const float want_f = static_cast<float>(want);
    if (want_f < 1.17549435e-38f) {  // subnormal results: within one subnormal step
      EXPECT_LE(std::fabs(static_cast<double>(got) - want), 1.5e-45) << x;
      return;
    }
    const int64_t d = ulp_distance(got, want_f);
    if (d > worst) {
      worst = d;
      worst_x = x;
    }
  };
  for (uint32_t u = 0; u < 0x42b17218u; u += 97) {  // [0, 88.72]
    float x;
    std::memcpy(&x, &u, 4);
    check(x);
  }
  for (uint32_t u = 0x80000000u; u < 0xc2d00000u; u += 97) {  // [-104, 0]
    float x;
    std::memcpy(&x, &u, 4);
    check(x);
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_x;
  EXPECT_EQ(memra::sampling::memra_exp(0.0f), 1.0f);
  EXPECT_EQ(memra::sampling::memra_exp(-INFINITY), 0.0f);
  EXPECT_EQ(memra::sampling::memra_exp(-105.0f), 0.0f);
  EXPECT_TRUE(std::isinf(memra::sampling::memra_exp(89.0f)));
  EXPECT_TRUE(std::isnan(memra::sampling::memra_exp(NAN)));
  std::cout << "[ memra_exp ] worst " << worst << " ulp at " << worst_x << "\n";
}

TEST(SamplingRef, SharedPhiloxEqualsTheHostOne) {
  uint32_t c[4] = {0, 0, 0, 0};
  memra::sampling::philox4x32_10(c, 0, 0);
  EXPECT_EQ(c[0], 0x6627e8d5u);
  EXPECT_EQ(c[3], 0x9b00dbd8u);
  uint32_t d[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
  memra::sampling::philox4x32_10(d, 0xffffffffu, 0xffffffffu);
  EXPECT_EQ((std::array<uint32_t, 4>{d[0], d[1], d[2], d[3]}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  std::mt19937_64 g(3);
  for (int i = 0; i < 10000; ++i) {
    const uint64_t seed = g(), pos = i < 5000 ? g() : static_cast<uint64_t>(i);
    EXPECT_EQ(memra::sampling::philox_uniform(seed, pos), memra::engine::philox_uniform(seed, pos));
  }
}

TEST(SamplingRef, PenaltyEntriesMergeHistory) {
  memra::engine::SamplingParams p;
  EXPECT_TRUE(memra::engine::penalty_entries(p, std::vector<int32_t>{1, 2}, std::vector<int32_t>{3}).empty());
  p.frequency_penalty = 0.5f;
  const std::vector<int32_t> prompt = {5, 5, 7}, output = {7, 9, 7}, assumed = {9};
  auto e = memra::engine::penalty_entries(p, prompt, output, assumed);
  ASSERT_EQ(e.size(), 2u);  // the prompt only counts for the repetition penalty
  EXPECT_EQ(e[0].id, 7);
  EXPECT_EQ(e[0].count >> 1, 2);
  EXPECT_EQ(e[1].id, 9);
  EXPECT_EQ(e[1].count >> 1, 2);
  p.repetition_penalty = 1.2f;
  e = memra::engine::penalty_entries(p, prompt, output, assumed);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, 5);
  EXPECT_EQ(e[0].count, 1);
  // The same choice as applying the penalties to the row by hand.
  std::vector<float> x = {2.0f, 1.0f, 0.5f, 0.0f, 0.0f, 2.5f, 0.0f, 2.2f, 0.0f, 1.9f};
  std::vector<float> y = x;
  y[5] = 2.5f / 1.2f;
  y[7] = 2.2f / 1.2f - (0.0f + 0.5f * 2.0f);
  y[9] = 1.9f / 1.2f - (0.0f + 0.5f * 2.0f);
  p.temperature = 0.0f;
  EXPECT_EQ(memra::engine::sample(x, p, 0, prompt, std::vector<int32_t>{7, 9, 7, 9}).token, memra::engine::argmax(y));
}
