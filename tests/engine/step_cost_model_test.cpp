// The speculation fallback's measured cost of one more token in a step: a line fitted
// to (tokens, seconds) of recent decode steps, the policy's fixed value when set.
#include <gtest/gtest.h>

#include "host/engine/spec_policy.hpp"

namespace memra::engine {
namespace {

TEST(EngineStepCostModel, FitsTheMarginalCostOfATokenOnceStepsVary) {
  StepCostModel m;
  // t = 6 ms + 1.5 ms per token: one more token costs 1.5 / 7.5 = 0.2 of a one-token step.
  for (int i = 0; i < 7; ++i) m.observe(1, 0.0075);
  EXPECT_DOUBLE_EQ(m.token_cost(0.1), 0.1) << "all steps one size: no slope yet";
  for (int i = 0; i < 10; ++i) m.observe(1 + i % 5, 0.006 + 0.0015 * (1 + i % 5));
  EXPECT_NEAR(m.token_cost(0.1), 0.2, 1e-9);
  // The fit follows the recent steps: tokens now cost as much as a whole step.
  for (int i = 0; i < 400; ++i) m.observe(1 + i % 5, 0.005 * (1 + i % 5));
  EXPECT_NEAR(m.token_cost(0.1), 1.0, 1e-3);
}

TEST(EngineStepCostModel, IgnoresNonsenseAndClamps) {
  StepCostModel m;
  m.observe(0, 0.01);
  m.observe(3, -1.0);
  EXPECT_EQ(m.observations(), 0);
  // Bigger steps faster than small ones (noise): the cost clamps at 0.
  for (int i = 0; i < 20; ++i) m.observe(1 + i % 4, 0.01 - 0.001 * (i % 4));
  EXPECT_DOUBLE_EQ(m.token_cost(0.1), 0.0);
}

TEST(EngineStepCostModel, AFixedPolicyValueWins) {
  StepCostModel m;
  for (int i = 0; i < 20; ++i) m.observe(1 + i % 4, 0.005 * (1 + i % 4));
  SpecPolicy fixed;
  fixed.verify_token_cost = 0.3;
  EXPECT_DOUBLE_EQ(verify_token_cost(fixed, m), 0.3);
  SpecPolicy measured;  // the default: measured
  EXPECT_NEAR(verify_token_cost(measured, m), 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(verify_token_cost(measured, StepCostModel{}), kDefaultVerifyTokenCost);
}

}  // namespace
}  // namespace memra::engine
