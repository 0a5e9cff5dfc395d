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

  struct Hit {
    std::vector<int32_t> blocks;  // retained for the caller
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
  // Frees the least recently used leaf entry no sequence is using; false when none.
  bool evict_one();
  // Releases the least recently used snapshot (its entry stays); false when none.
  bool evict_state();

  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  int32_t states() const { return held_states_; }
  // For models whose sequences carry state besides KV (recurrent) or whose sliding-window
  // pools drop old blocks: lookups find nothing and inserts keep nothing.
  void disable() { enabled_ = false; }
  bool enabled() const { return enabled_; }

 private:
  struct Entry {
    uint64_t id = 0;
    std::string key;       // (parent id, the block's tokens)
    uint64_t parent = 0;   // 0: the block starts its prompt
    int32_t block = -1;
    int32_t state = -1;    // recurrent-state snapshot after this block (-1: none)
    int64_t children = 0;  // cached entries whose parent this is
    std::list<uint64_t>::iterator lru;
  };
  uint64_t root_of(const std::string& ns, bool create);
  static std::string key_for(uint64_t parent, std::span<const int32_t> block_tokens);
  void drop_state(Entry& e);

  KvBlockAllocator& blocks_;
  int64_t block_size_;
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
