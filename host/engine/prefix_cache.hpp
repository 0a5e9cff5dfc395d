// Prefix cache over the paged KV cache: full KV blocks of finished prompts are
// kept so a later prompt that starts with the same tokens reuses their KV instead
// of recomputing it. The namespace is (model, tenant, cache_salt): one tenant can
// never hit, or time, another's entries. Blocks are shared read-only (new tokens
// always go to fresh blocks).
//
// Entries form a chain per namespace: block i's entry is keyed by (its parent
// entry, the block's own tokens), so a lookup walks the prompt block by block and
// compares each block's stored tokens exactly — O(prompt length), not the O(n^2)
// of keying every block by its whole prefix. Only leaves are evicted (least
// recently used first, and only when no sequence reads them), so a cached block
// is always reachable from its namespace's root.
//
// Models with more than one KV pool (sliding-window layers keep theirs apart,
// docs/ARCHITECTURE.md "State manager"): an entry holds every pool's block of its
// position, a sliding pool's only while some sequence still had it when the block was
// offered (-1 otherwise: the window had dropped it), and a lookup stops at the deepest
// entry from which every sliding pool still holds the blocks its window reads for the next
// token (the same tokens' KV is the same bits whichever sequence wrote it: batch and chunk
// invariance). A sliding pool's cached blocks are given up first when that pool runs out.
//
// Models whose sequences also carry recurrent state (hybrids) need that state at the
// hit's last token: an entry may hold a snapshot of it (a recurrent-state slot, taken
// by the engine when a sequence stood exactly at the block's end), and a lookup then
// stops at the deepest entry of the run that holds one. Snapshots are bounded
// (max_states): past it the least recently used one is dropped, its entry kept as a link.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "host/engine/kv_blocks.hpp"

namespace memra::engine {

class PrefixCache {
 public:
  PrefixCache(KvBlockAllocator& blocks, int64_t block_size) : blocks_(blocks), block_size_(block_size) {}

  // From now on every hit needs a state snapshot; snapshots are slots of `states` (the
  // engine maps them to its backend's recurrent-state slots), at most max_states at once.
  void require_state(KvBlockAllocator& states, int32_t max_states);
  bool requires_state() const { return states_ != nullptr; }
  // The model's KV pools (pools[0] is the allocator the cache was made with) and each
  // pool's sliding window (0: every position). Without it the cache keeps pool 0 alone.
  void set_pools(std::span<KvBlockAllocator> pools, std::vector<int64_t> windows);

  struct Hit {
    std::vector<int32_t> blocks;  // retained for the caller (pool 0; -1 where a sliding pool 0 reads none)
    // Pools 1.. (set_pools): one list per pool, as long as `blocks`, -1 for blocks the
    // window does not read from the hit on.
    std::vector<std::vector<int32_t>> pool_blocks;
    int32_t state = -1;           // the snapshot after the last block (the cache keeps it)
    int64_t tokens(int64_t block_size) const { return static_cast<int64_t>(blocks.size()) * block_size; }
  };
  // Longest run of cached blocks that `tokens` starts with (ending at an entry with a
  // snapshot, where the cache requires state), leaving at least one token to compute
  // (its logits are needed).
  Hit lookup(const std::string& ns, std::span<const int32_t> tokens);
  // Offers a sequence's full blocks covering `tokens` (block i holds tokens
  // [i*bs, (i+1)*bs)). Blocks already cached for the same prefix are skipped. `state`:
  // a snapshot of the state after the last full block (a slot the caller allocated; the
  // cache owns it from here, or releases it when that entry already holds one).
  // Returns the number of blocks it newly cached.
  int64_t insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks, int32_t state = -1);
  // The same with every pool's blocks (pool_blocks[p] for pool p, -1 where a sliding pool
  // dropped one); an entry cached without a sliding pool's block takes this one's.
  int64_t insert_pools(const std::string& ns, std::span<const int32_t> tokens, const std::vector<std::vector<int32_t>>& pool_blocks,
                       int32_t state = -1);
  // Frees a block of `pool` that no sequence is using: pool 0's by dropping the least
  // recently used leaf entry (with its other pools' blocks), another pool's by letting the
  // least recently used entry holding one forget it. False when none.
  bool evict_one(int32_t pool = 0);
  // Releases the least recently used snapshot (its entry stays); false when none.
  bool evict_state();

  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  int32_t states() const { return held_states_; }
  // Lookups find nothing and inserts keep nothing (EngineOptions / a model whose state the
  // cache cannot snapshot).
  void disable() { enabled_ = false; }
  bool enabled() const { return enabled_; }

 private:
  struct Entry {
    uint64_t id = 0;
    std::string key;       // (parent id, the block's tokens)
    uint64_t parent = 0;   // 0: the block starts its prompt
    std::vector<int32_t> blocks;  // per pool (-1: a sliding pool's block it does not hold)
    int32_t state = -1;    // recurrent-state snapshot after this block (-1: none)
    int64_t children = 0;  // cached entries whose parent this is
    std::list<uint64_t>::iterator lru;
  };
  uint64_t root_of(const std::string& ns, bool create);
  static std::string key_for(uint64_t parent, std::span<const int32_t> block_tokens);
  void drop_state(Entry& e);
  // The hit of the first `k` entries of `run` is usable: the state (where required) and
  // every pool's blocks the next token reads are there.
  bool hit_ok(const std::vector<Entry*>& run, size_t k) const;
  // The first entry of a hit of `k` entries whose block of pool `p` the next token reads.
  size_t first_read(size_t p, size_t k) const;

  KvBlockAllocator& blocks_;
  int64_t block_size_;
  std::vector<KvBlockAllocator*> pools_{&blocks_};  // pools_[0] == &blocks_
  std::vector<int64_t> windows_{0};
  bool enabled_ = true;
  KvBlockAllocator* states_ = nullptr;
  int32_t max_states_ = 0, held_states_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<std::string, uint64_t> roots_;      // namespace -> root id
  std::unordered_map<std::string, uint64_t> by_key_;     // key -> entry id
  std::unordered_map<uint64_t, Entry> entries_;          // id -> entry
  std::list<uint64_t> lru_;                              // front = most recently used
};

}  // namespace memra::engine
