// The prefix cache's chain of blocks: exact matches per namespace, the longest cached
// run leaving one token to compute, shared prefixes of different prompts, and
// leaf-first LRU eviction that never frees a block a sequence reads; with recurrent
// state, hits end at a state snapshot and snapshots are bounded and evicted LRU first;
// with a sliding-window pool, hits end where that pool holds what the window reads.
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
  auto found = f.cache.lookup("a", more).blocks;
  EXPECT_EQ(found, std::vector<int32_t>(held.begin(), held.begin() + 3));
  f.release(found);

  // Exactly 12 tokens: one token must stay to compute, so two blocks.
  found = f.cache.lookup("a", iota(12)).blocks;
  EXPECT_EQ(found.size(), 2u);
  f.release(found);

  // A difference in block 1 stops the run after block 0.
  std::vector<int32_t> diverge = prompt;
  diverge[5] = 99;
  found = f.cache.lookup("a", diverge).blocks;
  EXPECT_EQ(found, std::vector<int32_t>{held[0]});
  f.release(found);

  // Same tokens in block 1 but a different block 0: no hit at all (the chain is exact).
  std::vector<int32_t> other_start = prompt;
  other_start[0] = 77;
  EXPECT_TRUE(f.cache.lookup("a", other_start).blocks.empty());
  EXPECT_TRUE(f.cache.lookup("b", prompt).blocks.empty());  // another namespace
  EXPECT_TRUE(f.cache.lookup("a", {}).blocks.empty());
}

TEST(EnginePrefixCache, SharedPrefixesBranchAndEvictLeavesFirst) {
  Fixture f;
  std::vector<int32_t> p1 = iota(12), p2 = iota(12);
  p2[8] = 500;  // same first two blocks, different third
  const auto b1 = f.finish("n", p1);
  const auto b2 = f.finish("n", p2);
  EXPECT_EQ(f.cache.entries(), 4);  // p2's first two blocks were already cached

  auto found = f.cache.lookup("n", iota(13)).blocks;
  EXPECT_EQ(found, b1);
  f.release(found);
  std::vector<int32_t> q2 = p2;
  q2.push_back(1);
  found = f.cache.lookup("n", q2).blocks;
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
  EXPECT_TRUE(f.cache.lookup("n", iota(13)).blocks.empty());
  f.finish("n", p1);
  found = f.cache.lookup("n", iota(13)).blocks;
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
  const auto found = cache.lookup("x", prompt).blocks;
  ASSERT_EQ(found.size(), 2000u);
  EXPECT_TRUE(std::equal(found.begin(), found.end(), held.begin()));
}

// Hybrid models: a hit must end where a state snapshot is; snapshots stay within their
// bound (least recently used dropped first, their entries kept as links) and go back to
// the state allocator when dropped or evicted with their entry.
TEST(EnginePrefixCache, WithStateHitsEndAtASnapshot) {
  Fixture f;
  KvBlockAllocator states{8};
  f.cache.require_state(states, 2);
  auto finish = [&](const std::string& ns, const std::vector<int32_t>& tokens) {
    std::vector<int32_t> held;
    for (size_t i = 0; i < tokens.size() / kBs; ++i) held.push_back(*f.blocks.allocate());
    const int32_t snap = *states.allocate();
    f.cache.insert(ns, tokens, held, snap);
    for (int32_t b : held) f.blocks.release(b);
    return snap;
  };
  // A prompt of 8 tokens (2 blocks) cached with its state: a longer prompt hits both blocks
  // and gets the snapshot; one that diverges in block 2 finds no state after block 1: no hit.
  const int32_t s8 = finish("a", iota(8));
  auto hit = f.cache.lookup("a", iota(11));
  EXPECT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.state, s8);
  f.release(hit.blocks);
  std::vector<int32_t> diverge = iota(11);
  diverge[5] = 99;
  hit = f.cache.lookup("a", diverge);
  EXPECT_TRUE(hit.blocks.empty());
  EXPECT_EQ(hit.state, -1);
  // A third block (12 tokens) with its own snapshot: the deepest one is taken.
  const int32_t s12 = finish("a", iota(12));
  hit = f.cache.lookup("a", iota(20));
  EXPECT_EQ(hit.blocks.size(), 3u);
  EXPECT_EQ(hit.state, s12);
  f.release(hit.blocks);
  EXPECT_EQ(f.cache.states(), 2);
  // Inserting without a state keeps nothing; the same state twice keeps one.
  f.cache.insert("a", iota(16), {}, -1);
  const int32_t again = *states.allocate();
  std::vector<int32_t> held;
  for (int i = 0; i < 3; ++i) held.push_back(*f.blocks.allocate());
  f.cache.insert("a", iota(12), held, again);
  for (int32_t b : held) f.blocks.release(b);
  EXPECT_EQ(f.cache.states(), 2);
  EXPECT_EQ(states.refs(again), 0);  // given back
  // Past the bound the least recently used snapshot goes (s8: the lookups touched s12 last).
  const int32_t other = finish("b", iota(4, 50));
  EXPECT_EQ(f.cache.states(), 2);
  EXPECT_EQ(states.refs(s8), 0);
  EXPECT_EQ(states.refs(s12), 1);
  EXPECT_EQ(states.refs(other), 1);
  hit = f.cache.lookup("a", iota(9));  // block 2's state is gone: no hit there now
  EXPECT_TRUE(hit.blocks.empty());
  // Evicting everything gives every snapshot back.
  while (f.cache.evict_one()) {
  }
  EXPECT_EQ(f.cache.states(), 0);
  EXPECT_EQ(states.num_free(), 8);
  EXPECT_EQ(f.blocks.num_free(), f.blocks.num_blocks());
}

// Two pools, the second sliding with a window of 6 (4-token blocks): an entry keeps both
// pools' blocks, -1 where the offering sequence's window had dropped one; a hit ends at the
// deepest entry from which the sliding pool holds every block the next token reads
// (positions from k*4 - 5 on) and hands those out, -1 before them; a later offer of the same
// tokens fills a dropped block in; evict_one(1) makes entries forget sliding blocks no
// sequence reads (the chain stays), evict_one(0) drops a leaf with both pools' blocks.
TEST(EnginePrefixCache, SlidingPoolHitsEndWhereTheWindowIsHeld) {
  std::vector<KvBlockAllocator> pools{KvBlockAllocator{32}, KvBlockAllocator{32}};
  PrefixCache cache{pools[0], kBs};
  cache.set_pools(pools, {0, 6});
  const std::vector<int32_t> prompt = iota(21);  // 5 full blocks
  std::vector<int32_t> full, window;
  for (int i = 0; i < 5; ++i) full.push_back(*pools[0].allocate());
  for (int i = 0; i < 5; ++i) window.push_back(*pools[1].allocate());
  // The sequence had dropped sliding blocks 0-2 (as drop_window_blocks does) when it offered.
  std::vector<int32_t> offered = window;
  for (int i = 0; i < 3; ++i) {
    pools[1].release(offered[static_cast<size_t>(i)]);
    offered[static_cast<size_t>(i)] = -1;
  }
  EXPECT_EQ(cache.insert_pools("n", prompt, {full, offered}), 5);
  for (int32_t b : full) pools[0].release(b);
  for (int i = 3; i < 5; ++i) pools[1].release(window[static_cast<size_t>(i)]);

  // At 20 the next token reads positions 15-19: sliding blocks 3 and 4, both held.
  auto hit = cache.lookup("n", iota(24));
  ASSERT_EQ(hit.blocks, full);
  ASSERT_EQ(hit.pool_blocks.size(), 1u);
  EXPECT_EQ(hit.pool_blocks[0], (std::vector<int32_t>{-1, -1, -1, window[3], window[4]}));
  EXPECT_EQ(pools[1].refs(window[4]), 2) << "retained for the caller";
  for (int32_t b : hit.blocks) pools[0].release(b);
  for (int32_t b : hit.pool_blocks[0])
    if (b >= 0) pools[1].release(b);
  // A prompt diverging in block 4: at 16 the window reads 11-15 (blocks 2 and 3) and block 2
  // was dropped; at 12 it reads 7-11 (blocks 1, 2): gone too; down to no hit at all.
  std::vector<int32_t> diverge = iota(24);
  diverge[17] = 900;
  EXPECT_TRUE(cache.lookup("n", diverge).blocks.empty());

  // The same tokens offered again by a sequence that still held blocks 1-4: the entries
  // take the ones they lacked, and the diverging prompt now hits 16 tokens.
  std::vector<int32_t> again(5, -1);
  for (int i = 1; i < 5; ++i) again[static_cast<size_t>(i)] = *pools[1].allocate();
  EXPECT_EQ(cache.insert_pools("n", prompt, {full, again}), 0) << "no new entries, only sliding blocks filled in";
  for (int i = 1; i < 5; ++i) pools[1].release(again[static_cast<size_t>(i)]);
  EXPECT_EQ(pools[1].refs(again[4]), 0) << "entry 4 kept the block it had";
  EXPECT_EQ(pools[1].refs(again[1]), 1) << "entry 1 took the offered block";
  hit = cache.lookup("n", diverge);
  ASSERT_EQ(hit.blocks.size(), 4u);
  EXPECT_EQ(hit.pool_blocks[0], (std::vector<int32_t>{-1, -1, again[2], window[3]}));
  for (int32_t b : hit.blocks) pools[0].release(b);
  for (int32_t b : hit.pool_blocks[0])
    if (b >= 0) pools[1].release(b);

  // The sliding pool runs short: entries forget their blocks there (4 held), LRU first.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(cache.evict_one(1)) << i;
  EXPECT_FALSE(cache.evict_one(1));
  EXPECT_EQ(pools[1].num_free(), pools[1].num_blocks());
  EXPECT_EQ(cache.entries(), 5);
  EXPECT_TRUE(cache.lookup("n", iota(24)).blocks.empty()) << "no window blocks: no hit";
  // Pool 0 runs short: leaves go, with whatever they hold.
  while (cache.evict_one(0)) {
  }
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(pools[0].num_free(), pools[0].num_blocks());
}

}  // namespace
}  // namespace memra::engine
