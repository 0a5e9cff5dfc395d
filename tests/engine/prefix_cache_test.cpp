// The prefix cache's chain of blocks: exact matches per namespace, the longest cached
// run leaving one token to compute, shared prefixes of different prompts, and
// leaf-first LRU eviction that never frees a block a sequence reads.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "host/engine/prefix_cache.hpp"

namespace memra::engine {
namespace {

constexpr int64_t kBs = 4;

struct Fixture {
  KvBlockAllocator blocks{32};
  PrefixCache cache{blocks, kBs};

  // A finished sequence: allocates one block per (partial) block of `tokens`, offers
  // them to the cache, then lets go of them as a closing sequence does.
  std::vector<int32_t> finish(const std::string& ns, const std::vector<int32_t>& tokens) {
    std::vector<int32_t> held;
    for (size_t i = 0; i < (tokens.size() + kBs - 1) / kBs; ++i) held.push_back(*blocks.allocate());
    cache.insert(ns, tokens, held);
    for (int32_t b : held) blocks.release(b);
    return held;
  }
  void release(const std::vector<int32_t>& found) {
    for (int32_t b : found) blocks.release(b);
  }
};

std::vector<int32_t> iota(int n, int from = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

TEST(EnginePrefixCache, FindsTheLongestExactRunPerNamespace) {
  Fixture f;
  const std::vector<int32_t> prompt = iota(13);  // 3 full blocks + 1 token
  const std::vector<int32_t> held = f.finish("a", prompt);
  EXPECT_EQ(f.cache.entries(), 3);

  std::vector<int32_t> more = iota(20);
  auto found = f.cache.lookup("a", more);
  EXPECT_EQ(found, std::vector<int32_t>(held.begin(), held.begin() + 3));
  f.release(found);

  // Exactly 12 tokens: one token must stay to compute, so two blocks.
  found = f.cache.lookup("a", iota(12));
  EXPECT_EQ(found.size(), 2u);
  f.release(found);

  // A difference in block 1 stops the run after block 0.
  std::vector<int32_t> diverge = prompt;
  diverge[5] = 99;
  found = f.cache.lookup("a", diverge);
  EXPECT_EQ(found, std::vector<int32_t>{held[0]});
  f.release(found);

  // Same tokens in block 1 but a different block 0: no hit at all (the chain is exact).
  std::vector<int32_t> other_start = prompt;
  other_start[0] = 77;
  EXPECT_TRUE(f.cache.lookup("a", other_start).empty());
  EXPECT_TRUE(f.cache.lookup("b", prompt).empty());  // another namespace
  EXPECT_TRUE(f.cache.lookup("a", {}).empty());
}

TEST(EnginePrefixCache, SharedPrefixesBranchAndEvictLeavesFirst) {
  Fixture f;
  std::vector<int32_t> p1 = iota(12), p2 = iota(12);
  p2[8] = 500;  // same first two blocks, different third
  const auto b1 = f.finish("n", p1);
  const auto b2 = f.finish("n", p2);
  EXPECT_EQ(f.cache.entries(), 4);  // p2's first two blocks were already cached

  auto found = f.cache.lookup("n", iota(13));
  EXPECT_EQ(found, b1);
  f.release(found);
  std::vector<int32_t> q2 = p2;
  q2.push_back(1);
  found = f.cache.lookup("n", q2);
  EXPECT_EQ(found, (std::vector<int32_t>{b1[0], b1[1], b2[2]}));
  // While a sequence reads p2's blocks, eviction takes the other leaf only.
  ASSERT_TRUE(f.cache.evict_one());
  EXPECT_EQ(f.cache.entries(), 3);
  EXPECT_EQ(f.blocks.refs(b1[2]), 0) << "p1's last block was the evictable leaf";
  EXPECT_FALSE(f.cache.evict_one()) << "every other entry is read by the sequence or has a child";
  f.release(found);

  // Then leaves go first: p2's third block, then the shared second, then the first.
  ASSERT_TRUE(f.cache.evict_one());
  EXPECT_EQ(f.blocks.refs(b2[2]), 0);
  ASSERT_TRUE(f.cache.evict_one());
  EXPECT_EQ(f.blocks.refs(b1[1]), 0);
  ASSERT_TRUE(f.cache.evict_one());
  EXPECT_EQ(f.cache.entries(), 0);
  EXPECT_EQ(f.blocks.num_free(), f.blocks.num_blocks());
  EXPECT_FALSE(f.cache.evict_one());
  // Nothing cached: a lookup finds nothing and a new insert works again.
  EXPECT_TRUE(f.cache.lookup("n", iota(13)).empty());
  f.finish("n", p1);
  found = f.cache.lookup("n", iota(13));
  EXPECT_EQ(found.size(), 3u);
  f.release(found);
}

TEST(EnginePrefixCache, LongPromptsWalkBlockByBlock) {
  // 2,000 blocks: every block is found, in order, with its own tokens compared.
  KvBlockAllocator blocks{2100};
  PrefixCache cache{blocks, 16};
  const std::vector<int32_t> prompt = iota(16 * 2000 + 1, 1000);
  std::vector<int32_t> held;
  for (int i = 0; i < 2001; ++i) held.push_back(*blocks.allocate());
  cache.insert("x", prompt, held);
  const auto found = cache.lookup("x", prompt);
  ASSERT_EQ(found.size(), 2000u);
  EXPECT_TRUE(std::equal(found.begin(), found.end(), held.begin()));
}

}  // namespace
}  // namespace memra::engine
