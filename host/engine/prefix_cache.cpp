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

void PrefixCache::require_state(KvBlockAllocator& states, int32_t max_states) {
  states_ = &states;
  max_states_ = max_states;
}

void PrefixCache::set_pools(std::span<KvBlockAllocator> pools, std::vector<int64_t> windows) {
  pools_.assign(1, &blocks_);
  for (size_t p = 1; p < pools.size(); ++p) pools_.push_back(&pools[p]);
  windows = std::vector<int64_t>(windows.begin(), windows.begin() + static_cast<std::ptrdiff_t>(std::min(windows.size(), pools_.size())));
  windows.resize(pools_.size(), 0);
  windows_ = std::move(windows);
}

size_t PrefixCache::first_read(size_t p, size_t k) const {
  // A token at position k * bs reads positions from k * bs - window + 1 on.
  const int64_t w = windows_[p];
  if (w <= 0) return 0;
  return static_cast<size_t>(std::max<int64_t>(0, static_cast<int64_t>(k) * block_size_ - w + 1) / block_size_);
}

bool PrefixCache::hit_ok(const std::vector<Entry*>& run, size_t k) const {
  if (k == 0) return true;
  if (states_ && run[k - 1]->state < 0) return false;
  for (size_t p = 0; p < pools_.size(); ++p)
    for (size_t i = first_read(p, k); i < k; ++i)
      if (p >= run[i]->blocks.size() || run[i]->blocks[p] < 0) return false;
  return true;
}

PrefixCache::Hit PrefixCache::lookup(const std::string& ns, std::span<const int32_t> tokens) {
  Hit hit;
  if (tokens.empty() || !enabled_) return hit;
  uint64_t parent = root_of(ns, false);
  if (parent == 0) return hit;
  const auto bs = static_cast<size_t>(block_size_);
  const size_t usable = (tokens.size() - 1) / bs;
  std::vector<Entry*> run;
  for (size_t i = 0; i < usable; ++i) {
    auto k = by_key_.find(key_for(parent, tokens.subspan(i * bs, bs)));
    if (k == by_key_.end()) break;
    Entry& e = entries_.at(k->second);
    run.push_back(&e);
    parent = e.id;
  }
  // The run ends where the state is known (recurrent models) and every sliding pool still
  // holds what the next token reads.
  size_t k = run.size();
  while (k > 0 && !hit_ok(run, k)) --k;
  run.resize(k);
  hit.pool_blocks.resize(pools_.size() - 1);
  for (size_t p = 0; p < pools_.size(); ++p) {
    std::vector<int32_t>& out = p == 0 ? hit.blocks : hit.pool_blocks[p - 1];
    const size_t from = first_read(p, k);
    for (size_t i = 0; i < k; ++i) {
      const int32_t b = i >= from ? run[i]->blocks[p] : -1;
      if (b >= 0) pools_[p]->retain(b);
      out.push_back(b);
    }
  }
  for (Entry* e : run) lru_.splice(lru_.begin(), lru_, e->lru);
  if (!run.empty()) hit.state = run.back()->state;
  return hit;
}

int64_t PrefixCache::insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks, int32_t state) {
  return insert_pools(ns, tokens, std::vector<std::vector<int32_t>>{std::vector<int32_t>(blocks.begin(), blocks.end())}, state);
}

int64_t PrefixCache::insert_pools(const std::string& ns, std::span<const int32_t> tokens,
                                  const std::vector<std::vector<int32_t>>& pool_blocks, int32_t state) {
  const auto bs = static_cast<size_t>(block_size_);
  const size_t full = pool_blocks.empty() ? 0 : std::min(tokens.size() / bs, pool_blocks[0].size());
  // Pool p's block of entry i, or -1 (dropped by a window, or a pool the caller did not give).
  auto block_of = [&](size_t p, size_t i) -> int32_t {
    return p < pool_blocks.size() && i < pool_blocks[p].size() ? pool_blocks[p][i] : -1;
  };
  if (!enabled_ || (states_ && (state < 0 || full == 0 || tokens.size() % bs != 0))) {
    if (state >= 0 && states_) states_->release(state);
    return 0;
  }
  int64_t added = 0;
  uint64_t parent = root_of(ns, true);
  Entry* last = nullptr;
  for (size_t i = 0; i < full; ++i) {
    std::string key = key_for(parent, tokens.subspan(i * bs, bs));
    if (auto k = by_key_.find(key); k != by_key_.end()) {
      parent = k->second;  // already cached (maybe from another sequence's block)
      last = &entries_.at(parent);
      // A block a window had dropped when the entry was made: this sequence's (the same KV).
      last->blocks.resize(pools_.size(), -1);
      for (size_t p = 0; p < pools_.size(); ++p)
        if (last->blocks[p] < 0 && block_of(p, i) >= 0) {
          pools_[p]->retain(block_of(p, i));
          last->blocks[p] = block_of(p, i);
        }
      continue;
    }
    const uint64_t id = next_id_++;
    if (auto p = entries_.find(parent); p != entries_.end()) ++p->second.children;
    std::vector<int32_t> held(pools_.size(), -1);
    for (size_t p = 0; p < pools_.size(); ++p)
      if ((held[p] = block_of(p, i)) >= 0) pools_[p]->retain(held[p]);
    lru_.push_front(id);
    by_key_.emplace(key, id);
    last = &entries_.emplace(id, Entry{id, std::move(key), parent, std::move(held), -1, 0, lru_.begin()}).first->second;
    parent = id;
    ++added;
  }
  if (state < 0) return added;
  if (last->state >= 0) {  // the same state (the forward pass is exact): keep the one held
    states_->release(state);
    return added;
  }
  while (held_states_ >= max_states_ && evict_state()) {
  }
  if (held_states_ >= max_states_) {
    states_->release(state);
    return added;
  }
  last->state = state;
  ++held_states_;
  return added;
}

void PrefixCache::drop_state(Entry& e) {
  if (e.state < 0) return;
  states_->release(e.state);
  e.state = -1;
  --held_states_;
}

bool PrefixCache::evict_state() {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    Entry& e = entries_.at(*it);
    if (e.state < 0) continue;
    drop_state(e);
    return true;
  }
  return false;
}

bool PrefixCache::evict_one(int32_t pool) {
  if (pool > 0) {
    // A sliding pool: the least recently used entry holding an unread block forgets it.
    const auto p = static_cast<size_t>(pool);
    if (p >= pools_.size()) return false;
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      Entry& e = entries_.at(*it);
      if (p >= e.blocks.size() || e.blocks[p] < 0 || pools_[p]->refs(e.blocks[p]) != 1) continue;
      pools_[p]->release(e.blocks[p]);
      e.blocks[p] = -1;
      return true;
    }
    return false;
  }
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto e = entries_.find(*it);
    if (e->second.children != 0) continue;  // keep the chain reachable
    bool read = false;                      // a sequence still reads one of its blocks
    for (size_t p = 0; p < e->second.blocks.size(); ++p)
      read |= e->second.blocks[p] >= 0 && pools_[p]->refs(e->second.blocks[p]) != 1;
    if (read) continue;
    drop_state(e->second);
    for (size_t p = 0; p < e->second.blocks.size(); ++p)
      if (e->second.blocks[p] >= 0) pools_[p]->release(e->second.blocks[p]);
    if (auto p = entries_.find(e->second.parent); p != entries_.end()) --p->second.children;
    by_key_.erase(e->second.key);
    lru_.erase(std::next(it).base());
    entries_.erase(e);
    return true;
  }
  return false;
}

}  // namespace memra::engine
