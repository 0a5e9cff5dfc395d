#include "host/engine/kv_blocks.hpp"

namespace memra::engine {

KvBlockAllocator::KvBlockAllocator(int32_t num_blocks) : refs_(static_cast<size_t>(num_blocks), 0) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks; b-- > 0;) free_.push_back(b);  // hand out block 0 first
}

std::optional<int32_t> KvBlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void KvBlockAllocator::retain(int32_t block) { ++refs_[static_cast<size_t>(block)]; }

void KvBlockAllocator::release(int32_t block) {
  if (--refs_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

}  // namespace memra::engine
