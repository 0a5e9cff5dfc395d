// Allocator of fixed-size KV-cache blocks (the paged KV cache's bookkeeping).
// Blocks are reference-counted so the prefix cache can share them between
// sequences; a block returns to the free list when its last user lets go.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace memra::engine {

class KvBlockAllocator {
 public:
  explicit KvBlockAllocator(int32_t num_blocks);

  std::optional<int32_t> allocate();   // nullopt when full
  void retain(int32_t block);
  void release(int32_t block);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t refs(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace memra::engine
