#include "host/engine/prefix_cache.hpp"

#include <algorithm>
#include <cstring>

namespace memra::engine {

std::string PrefixCache::key_for(uint64_t parent, std::span<const int32_t> block_tokens) {
  std::string k(sizeof parent + block_tokens.size() * sizeof(int32_t), '\0');
  std::memcpy(k.data(), &parent, sizeof parent);
  std::memcpy(k.data() + sizeof parent, block_tokens.data(), block_tokens.size() * sizeof(int32_t));
  return k;
}

uint64_t PrefixCache::root_of(const std::string& ns, bool create) {
  auto it = roots_.find(ns);
  if (it != roots_.end()) return it->second;
  if (!create) return 0;
  const uint64_t id = next_id_++;
  roots_.emplace(ns, id);
  return id;
}

std::vector<int32_t> PrefixCache::lookup(const std::string& ns, std::span<const int32_t> tokens) {
  std::vector<int32_t> found;
  if (tokens.empty() || !enabled_) return found;
  uint64_t parent = root_of(ns, false);
  if (parent == 0) return found;
  const auto bs = static_cast<size_t>(block_size_);
  const size_t usable = (tokens.size() - 1) / bs;
  for (size_t i = 0; i < usable; ++i) {
    auto k = by_key_.find(key_for(parent, tokens.subspan(i * bs, bs)));
    if (k == by_key_.end()) break;
    Entry& e = entries_.at(k->second);
    lru_.splice(lru_.begin(), lru_, e.lru);
    blocks_.retain(e.block);
    found.push_back(e.block);
    parent = e.id;
  }
  return found;
}

void PrefixCache::insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  if (!enabled_) return;
  const auto bs = static_cast<size_t>(block_size_);
  const size_t full = std::min(tokens.size() / bs, blocks.size());
  uint64_t parent = root_of(ns, true);
  for (size_t i = 0; i < full; ++i) {
    std::string key = key_for(parent, tokens.subspan(i * bs, bs));
    if (auto k = by_key_.find(key); k != by_key_.end()) {
      parent = k->second;  // already cached (maybe from another sequence's block)
      continue;
    }
    const uint64_t id = next_id_++;
    if (auto p = entries_.find(parent); p != entries_.end()) ++p->second.children;
    blocks_.retain(blocks[i]);
    lru_.push_front(id);
    by_key_.emplace(key, id);
    entries_.emplace(id, Entry{id, std::move(key), parent, blocks[i], 0, lru_.begin()});
    parent = id;
  }
}

bool PrefixCache::evict_one() {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto e = entries_.find(*it);
    if (e->second.children != 0) continue;                // keep the chain reachable
    if (blocks_.refs(e->second.block) != 1) continue;     // a sequence still reads it
    blocks_.release(e->second.block);
    if (auto p = entries_.find(e->second.parent); p != entries_.end()) --p->second.children;
    by_key_.erase(e->second.key);
    lru_.erase(std::next(it).base());
    entries_.erase(e);
    return true;
  }
  return false;
}

}  // namespace memra::engine
