// A compact open-addressing map string_view -> TokenId for vocabularies (100k-300k entries). Keys point into
// storage the owner keeps alive; a slot holds the hash, so a lookup costs about one cache miss for the slot
// and one for the key bytes — std::unordered_map costs several, which dominated tokenizer load time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "host/tokenizer/tokenizer.hpp"

namespace memra::tokenizer::detail {

class StringIdMap {
 public:
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n + n / 2 + 1) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    size_ = 0;
  }

  // Inserts key -> id unless the key is present; returns false when it was (the first id stays).
  bool insert(std::string_view key, TokenId id) {
    if ((size_ + 1) * 3 > slots_.size() * 2) grow();
    return insert_no_grow(key, id, false);
  }
  // Inserts or replaces.
  void assign(std::string_view key, TokenId id) {
    if ((size_ + 1) * 3 > slots_.size() * 2) grow();
    insert_no_grow(key, id, true);
  }

  const TokenId* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    std::uint64_t h = hash(key);
    auto tag = static_cast<std::uint32_t>(h >> 32) | 1u;
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.tag == 0) return nullptr;
      if (s.tag == tag && s.len == key.size() && std::memcmp(s.ptr, key.data(), key.size()) == 0) return &s.id;
    }
  }

  std::size_t size() const { return size_; }

  static std::uint64_t hash(std::string_view s) {
    std::uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
  }

 private:
  struct Slot {
    std::uint32_t tag = 0;  // 0 = empty
    TokenId id = 0;
    const char* ptr = nullptr;
    std::size_t len = 0;
  };

  bool insert_no_grow(std::string_view key, TokenId id, bool replace) {
    std::uint64_t h = hash(key);
    auto tag = static_cast<std::uint32_t>(h >> 32) | 1u;
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.tag == 0) {
        s = Slot{tag, id, key.data(), key.size()};
        ++size_;
        return true;
      }
      if (s.tag == tag && s.len == key.size() && std::memcmp(s.ptr, key.data(), key.size()) == 0) {
        if (replace) s.id = id;
        return false;
      }
    }
  }

  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    reserve(old.empty() ? 16 : old.size());
    for (const Slot& s : old)
      if (s.tag != 0) insert_no_grow(std::string_view(s.ptr, s.len), s.id, false);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace memra::tokenizer::detail
