// moe_ffn's kernels (kernels/moe/moe_ffn.cu), the file itself, on the host CTA emulator (no
// GPU needed): the routing is ref::moe_route_row's choice and weights (bitwise: both run
// moe_route.cuh's route_row, its exp memra_exp, on the GPU too), and scatter + combine give
// each row the reference's sum of
// its chosen experts' outputs, w_0 * o_0 + .. in selection order, bitwise.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/moe/moe_route_ref.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)
#include "kernels/moe/moe_ffn.cu"

namespace {

constexpr int32_t kTokens = 37, kExperts = 12, kHidden = 200;

std::vector<float> random_logits(std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(kTokens * kExperts));
  for (float& v : l) v = n(rng);
  // Ties, which must go to the lower index: whole rows equal, and two equal maxima.
  for (int32_t e = 0; e < kExperts; ++e) l[static_cast<size_t>(3 * kExperts + e)] = 0.25f;
  l[5 * kExperts + 2] = l[5 * kExperts + 9] = 9.0f;
  return l;
}

std::vector<float> route(const std::vector<float>& logits, int32_t top_k, bool normalize) {
  std::vector<float> routes(static_cast<size_t>(kTokens * 2 * top_k), NAN);
  memra::cuda_emu::launch((kTokens + 127) / 128, 1, 128,
                          [&] { memra_moe_route(logits.data(), kTokens, kExperts, top_k, normalize ? 1 : 0, routes.data()); }, [] {});
  return routes;
}

TEST(MoeEmulated, RoutingIsTheReferencesChoiceAndWeights) {
  std::mt19937 rng(5);
  const std::vector<float> logits = random_logits(rng);
  for (int32_t top_k : {1, 2, 8, kExperts})
    for (bool normalize : {false, true}) {
      SCOPED_TRACE(testing::Message() << "top_k " << top_k << " normalize " << normalize);
      const std::vector<float> routes = route(logits, top_k, normalize);
      for (int32_t t = 0; t < kTokens; ++t) {
        std::vector<int32_t> chosen(static_cast<size_t>(top_k));
        std::vector<float> weights(static_cast<size_t>(top_k));
        memra::ref::moe_route_row(logits.data() + t * kExperts, kExperts, top_k, normalize, chosen.data(), weights.data());
        const float* row = routes.data() + t * 2 * top_k;
        EXPECT_EQ(std::memcmp(row, chosen.data(), chosen.size() * 4), 0) << "row " << t << " chose other experts";
        EXPECT_EQ(std::memcmp(row + top_k, weights.data(), weights.size() * 4), 0) << "row " << t << "'s weights differ";
      }
    }
}

TEST(MoeEmulated, EachRowIsTheWeightedSumOfItsExpertsInSelectionOrder) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::vector<float> logits = random_logits(rng);
  constexpr int32_t kTopK = 3;
  const std::vector<float> routes = route(logits, kTopK, true);
  // outputs[e]: expert e's output for every row (what its MLP over all rows gives).
  std::vector<std::vector<float>> outputs(kExperts, std::vector<float>(static_cast<size_t>(kTokens * kHidden)));
  for (auto& o : outputs)
    for (float& v : o) v = n(rng);
  std::vector<float> contrib(static_cast<size_t>(kTokens * kTopK * kHidden), NAN), y(static_cast<size_t>(kTokens * kHidden), NAN);
  for (int32_t e = 0; e < kExperts; ++e)
    memra::cuda_emu::launch(kTokens, 1, 256, [&] { memra_moe_scatter(outputs[static_cast<size_t>(e)].data(), routes.data(), kTopK, kHidden, e, contrib.data()); },
                            [] {});
  memra::cuda_emu::launch(kTokens, 1, 256, [&] { memra_moe_combine(contrib.data(), routes.data(), kTopK, kHidden, y.data()); }, [] {});
  std::vector<float> want(y.size());
  for (int32_t t = 0; t < kTokens; ++t) {
    int32_t chosen[kTopK];
    float w[kTopK];
    memra::ref::moe_route_row(logits.data() + t * kExperts, kExperts, kTopK, true, chosen, w);
    for (int32_t h = 0; h < kHidden; ++h) {
      float acc = 0.0f;
      for (int32_t i = 0; i < kTopK; ++i) acc += w[i] * outputs[static_cast<size_t>(chosen[i])][static_cast<size_t>(t * kHidden + h)];
      want[static_cast<size_t>(t * kHidden + h)] = acc;
    }
  }
  EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << "rows differ from the reference's weighted sum";
}

}  // namespace
