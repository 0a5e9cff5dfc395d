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
  if (states_)  // the run ends where the state is known
    while (!run.empty() && run.back()->state < 0) run.pop_back();
  for (Entry* e : run) {
    lru_.splice(lru_.begin(), lru_, e->lru);
    blocks_.retain(e->block);
    hit.blocks.push_back(e->block);
  }
  if (!run.empty()) hit.state = run.back()->state;
  return hit;
}

int64_t PrefixCache::insert(const std::string& ns, std::span<const int32_t> tokens, std::span<const int32_t> blocks, int32_t state) {
  const auto bs = static_cast<size_t>(block_size_);
  const size_t full = std::min(tokens.size() / bs, blocks.size());
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
      continue;
    }
    const uint64_t id = next_id_++;
    if (auto p = entries_.find(parent); p != entries_.end()) ++p->second.children;
    blocks_.retain(blocks[i]);
    lru_.push_front(id);
    by_key_.emplace(key, id);
    last = &entries_.emplace(id, Entry{id, std::move(key), parent, blocks[i], -1, 0, lru_.begin()}).first->second;
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

bool PrefixCache::evict_one() {
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    auto e = entries_.find(*it);
    if (e->second.children != 0) continue;                // keep the chain reachable
    if (blocks_.refs(e->second.block) != 1) continue;     // a sequence still reads it
    drop_state(e->second);
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
