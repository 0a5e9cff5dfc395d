// The n-gram (prompt lookup) drafter's proposals: what follows the most recent earlier
// occurrence of the context's last n tokens, continued periodically past the end of
// the context (a loop drafts k tokens, not only what is left before the end).
#include <gtest/gtest.h>

#include <vector>

#include "host/engine/drafter.hpp"

namespace memra::engine {
namespace {

std::vector<int32_t> draft(const std::vector<int32_t>& context, int k, int max_n = 3, int min_n = 1) {
  NgramDrafter d(max_n, min_n);
  return d.draft(context, k);
}

TEST(EngineNgramDrafter, ContinuesWhatFollowedTheLastOccurrence) {
  EXPECT_EQ(draft({5, 6, 7, 8, 9, 1, 2, 5, 6}, 3), (std::vector<int32_t>{7, 8, 9}));
  // The most recent occurrence wins.
  EXPECT_EQ(draft({5, 6, 1, 5, 6, 2, 9, 5, 6}, 1), (std::vector<int32_t>{2}));
}

TEST(EngineNgramDrafter, ExtendsARepeatingPatternPastTheEnd) {
  // Period 3: the match two tokens back continues 3, then the period repeats.
  EXPECT_EQ(draft({1, 2, 3, 1, 2, 3, 1, 2}, 5), (std::vector<int32_t>{3, 1, 2, 3, 1}));
  // A one-token loop drafts k copies.
  EXPECT_EQ(draft({4, 7, 7, 7}, 4), (std::vector<int32_t>{7, 7, 7, 7}));
}

TEST(EngineNgramDrafter, PrefersLongerMatchesAndProposesNothingWithoutOne) {
  // "3 4" occurs after 9 (length-2 match) and "4" alone after 8: the 2-gram decides.
  EXPECT_EQ(draft({3, 4, 9, 8, 4, 0, 3, 4}, 1, 2, 1), (std::vector<int32_t>{9}));
  EXPECT_TRUE(draft({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(draft({}, 4).empty());
  EXPECT_TRUE(draft({1, 1}, 0).empty());
}

}  // namespace
}  // namespace memra::engine
