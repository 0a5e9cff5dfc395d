// Prefix cache over the paged KV cache: full KV blocks of finished prompts are
// kept, keyed by (namespace, every token up to the block's end), so a later
// prompt that starts with the same tokens reuses their KV instead of recomputing
// it. The namespace is (model, tenant, cache_salt): one tenant can never hit, or
// time, another's entries. Blocks are shared read-only (new tokens always go to
// fresh blocks), and an entry is evicted least-recently-used when the allocator
// needs room. Matches compare the stored tokens, not just a hash.
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

  // Longest run of cached blocks that `tokens` starts with, leaving at least one
  // token to compute (its logits are needed). The blocks are retained for the caller.
  std::vector<int32_t> lookup(const std::string& ns, std::span<const int32_t> tokens);
  // Offers a sequence's full blocks covering `tokens` (block i holds tokens
  // [i*bs, (i+1)*bs)). Blocks already cached under the same key are skipped.
  void insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks);
  // Frees the least recently used entry no sequence is using; false when none.
  bool evict_one();

  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    std::string key;
    int32_t block = -1;
    std::list<std::string>::iterator lru;
  };
  static std::string key_for(const std::string& ns, std::span<const int32_t> prefix);

  KvBlockAllocator& blocks_;
  int64_t block_size_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front = most recently used
};

}  // namespace memra::engine
