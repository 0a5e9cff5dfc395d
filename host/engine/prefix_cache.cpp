#include "host/engine/prefix_cache.hpp"

#include <cstring>

namespace memra::engine {

std::string PrefixCache::key_for(const std::string& ns, std::span<const int32_t> prefix) {
  // The exact key: namespace, a separator that cannot occur in it, then the raw ids.
  std::string k;
  k.reserve(ns.size() + 1 + prefix.size() * sizeof(int32_t));
  k.append(ns);
  k.push_back('\0');
  k.append(reinterpret_cast<const char*>(prefix.data()), prefix.size() * sizeof(int32_t));
  return k;
}

std::vector<int32_t> PrefixCache::lookup(const std::string& ns, std::span<const int32_t> tokens) {
  std::vector<int32_t> found;
  if (tokens.empty()) return found;
  const auto usable = static_cast<size_t>((static_cast<int64_t>(tokens.size()) - 1) / block_size_);
  for (size_t i = 0; i < usable; ++i) {
    auto it = entries_.find(key_for(ns, tokens.first((i + 1) * static_cast<size_t>(block_size_))));
    if (it == entries_.end()) break;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    blocks_.retain(it->second.block);
    found.push_back(it->second.block);
  }
  return found;
}

void PrefixCache::insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks) {
  const size_t full = std::min(tokens.size() / static_cast<size_t>(block_size_), blocks.size());
  for (size_t i = 0; i < full; ++i) {
    std::string key = key_for(ns, tokens.first((i + 1) * static_cast<size_t>(block_size_)));
    if (entries_.count(key)) continue;
    blocks_.retain(blocks[i]);
    lru_.push_front(key);
    entries_.emplace(key, Entry{key, blocks[i], lru_.begin()});
  }
}

bool PrefixCache::evict_one() {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto e = entries_.find(*it);
    if (blocks_.refs(e->second.block) != 1) continue;  // a sequence still reads it
    blocks_.release(e->second.block);
    lru_.erase(std::next(it).base());
    entries_.erase(e);
    return true;
  }
  return false;
}

}  // namespace memra::engine
