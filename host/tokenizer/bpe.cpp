#include "host/tokenizer/bpe.hpp"

#include <mutex>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <queue>

#include "host/tokenizer/utf8.hpp"

namespace memra::tokenizer::detail {

const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    std::array<bool, 256> direct{};
    for (int b = '!'; b <= '~'; ++b) direct[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = direct[b] ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

// ---- WordCache ------------------------------------------------------------

namespace {

class CacheTable {
 public:
  bool get(std::string_view word, std::uint64_t h, std::vector<TokenId>& out) const {
    if (slots_.empty()) return false;
    for (std::size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Entry& e = slots_[i];
      if (e.hash == 0) return false;
      if (e.hash == h && e.key_len == word.size() && std::memcmp(keys_.data() + e.key_off, word.data(), word.size()) == 0) {
        out.insert(out.end(), ids_.begin() + e.ids_off, ids_.begin() + e.ids_off + e.n_ids);
        return true;
      }
    }
  }
  void put(std::string_view word, std::uint64_t h, const TokenId* ids, std::size_t n) {
    if (slots_.empty() || used_ >= kSlots / 2 || keys_.size() > kMaxBytes) clear();
    for (std::size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      Entry& e = slots_[i];
      if (e.hash == h && e.key_len == word.size() && std::memcmp(keys_.data() + e.key_off, word.data(), word.size()) == 0)
        return;
      if (e.hash != 0) continue;
      e = Entry{h, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(word.size()),
                static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint32_t>(n)};
      keys_.append(word);
      ids_.insert(ids_.end(), ids, ids + n);
      ++used_;
      return;
    }
  }
  void clear() {
    slots_.assign(kSlots, Entry{});
    keys_.clear();
    ids_.clear();
    used_ = 0;
  }

 private:
  static constexpr std::size_t kSlots = std::size_t{1} << 12;
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 10;
  struct Entry {
    std::uint64_t hash = 0;  // 0 = empty
    std::uint32_t key_off = 0, key_len = 0, ids_off = 0, n_ids = 0;
  };
  std::vector<Entry> slots_;
  std::string keys_;
  std::vector<TokenId> ids_;
  std::size_t used_ = 0;
};

}  // namespace

// Shards of one tokenizer's cache, each behind its own lock: the memory is the
// tokenizer's (bounded, whatever the number of threads), not every thread's.
struct WordCache::Shard {
  std::mutex mu;
  CacheTable table;
};

WordCache::WordCache() : shards_(std::make_unique<Shard[]>(kShards)) {}
WordCache::~WordCache() = default;

namespace {
std::uint64_t word_hash(std::string_view s) { return StringIdMap::hash(s) | 1; }
}  // namespace

bool WordCache::get(std::string_view word, std::vector<TokenId>& out) const {
  const std::uint64_t h = word_hash(word);
  Shard& shard = shards_[(h >> 40) % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  return shard.table.get(word, h, out);
}

void WordCache::put(std::string_view word, const TokenId* ids, std::size_t n) const {
  const std::uint64_t h = word_hash(word);
  Shard& shard = shards_[(h >> 40) % kShards];
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.table.put(word, h, ids, n);
}

// ---- PairMap --------------------------------------------------------------

namespace {
constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
inline std::uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}
inline std::uint64_t mix(std::uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}
}  // namespace

void Bpe::PairMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys.assign(cap, kEmpty);
  values.assign(cap, PairValue{0, 0});
  mask = cap - 1;
}

void Bpe::PairMap::insert(TokenId a, TokenId b, PairValue v) {
  std::uint64_t k = pair_key(a, b);
  for (std::uint64_t i = mix(k) & mask;; i = (i + 1) & mask) {
    if (keys[i] == kEmpty || keys[i] == k) {
      keys[i] = k;
      values[i] = v;  // a repeated pair keeps the last rank, as a Rust HashMap collect does
      return;
    }
  }
}

const Bpe::PairValue* Bpe::PairMap::find(TokenId a, TokenId b) const {
  if (keys.empty()) return nullptr;
  std::uint64_t k = pair_key(a, b);
  for (std::uint64_t i = mix(k) & mask;; i = (i + 1) & mask) {
    if (keys[i] == k) return &values[i];
    if (keys[i] == kEmpty) return nullptr;
  }
}

// ---- Bpe ------------------------------------------------------------------

Result<std::unique_ptr<Bpe>> Bpe::create(const BpeSpec& spec, bool byte_level) {
  auto bpe = std::unique_ptr<Bpe>(new Bpe());
  bpe->byte_level_ = byte_level;
  bpe->ignore_merges_ = spec.ignore_merges;
  bpe->byte_fallback_ = spec.byte_fallback;
  bpe->fuse_unk_ = spec.fuse_unk;

  std::size_t total = 0;
  for (const auto& [text, id] : spec.vocab) total += text.size();
  bpe->arena_.reserve(total);
  std::vector<std::size_t> offsets;
  offsets.reserve(spec.vocab.size());
  for (const auto& [text, id] : spec.vocab) {
    offsets.push_back(bpe->arena_.size());
    bpe->arena_ += text;
  }
  bpe->vocab_.reserve(spec.vocab.size());
  for (std::size_t i = 0; i < spec.vocab.size(); ++i) {
    std::string_view s(bpe->arena_.data() + offsets[i], spec.vocab[i].first.size());
    bpe->vocab_.insert(s, spec.vocab[i].second);  // first id wins for a duplicated string
  }

  if (spec.unk_token) {
    const TokenId* unk = bpe->vocab_find(*spec.unk_token);
    if (!unk)
      return make_error(ErrorCode::invalid_argument, "tokenizer: the BPE unk_token \"" + *spec.unk_token +
                                                         "\" is not in the vocabulary; fix model.unk_token");
    bpe->unk_id_ = *unk;
  }

  const auto& b2u = byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, b2u[b]);
    const TokenId* id = bpe->vocab_find(ch);
    bpe->byte_ids_[b] = id ? *id : -1;
    bpe->byte_chars_[b] = std::move(ch);
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const TokenId* fb = bpe->vocab_find(name);
    bpe->fallback_ids_[b] = fb ? *fb : -1;
  }

  constexpr std::string_view kMeta = "\xE2\x96\x81";
  if (!byte_level && bpe->vocab_find(kMeta)) {
    bpe->meta_split_ = true;
    for (const auto& [text, id] : spec.vocab) {
      for (std::size_t k = text.find(kMeta, 1); k != std::string::npos; k = text.find(kMeta, k + 1)) {
        std::size_t j = k - 1;
        while (j > 0 && (static_cast<unsigned char>(text[j]) & 0xC0) == 0x80) --j;
        std::size_t at = j;
        bpe->meta_followed_.push_back(next_codepoint(text, at));
      }
    }
    std::sort(bpe->meta_followed_.begin(), bpe->meta_followed_.end());
    bpe->meta_followed_.erase(std::unique(bpe->meta_followed_.begin(), bpe->meta_followed_.end()),
                              bpe->meta_followed_.end());
  }

  bpe->pairs_.reserve(spec.merges.size());
  std::string joined;
  for (std::size_t i = 0; i < spec.merges.size(); ++i) {
    const auto& [a, b] = spec.merges[i];
    const TokenId* ia = bpe->vocab_find(a);
    const TokenId* ib = bpe->vocab_find(b);
    joined.assign(a);
    joined += b;
    const TokenId* inew = bpe->vocab_find(joined);
    if (!ia || !ib || !inew)
      return make_error(ErrorCode::invalid_argument, "tokenizer: merge #" + std::to_string(i) + " (\"" + a +
                                                         "\" \"" + b + "\") uses a token missing from the vocabulary");
    int rank = spec.merge_ranks.empty() ? static_cast<int>(i) : spec.merge_ranks[i];
    bpe->pairs_.insert(*ia, *ib, PairValue{rank, *inew});
  }
  bpe->merge_count_ = spec.merges.size();
  return bpe;
}

const TokenId* Bpe::vocab_find(std::string_view s) const { return vocab_.find(s); }

void Bpe::encode(std::string_view word, std::vector<TokenId>& out) const {
  if (!meta_split_) {
    encode_piece(word, out);
    return;
  }
  constexpr std::string_view kMeta = "\xE2\x96\x81";
  std::size_t start = 0;
  for (std::size_t k = word.find(kMeta, 1); k != std::string_view::npos; k = word.find(kMeta, k + 1)) {
    std::size_t j = k - 1;
    while (j > start && (static_cast<unsigned char>(word[j]) & 0xC0) == 0x80) --j;
    std::size_t at = j;
    char32_t prev = next_codepoint(word, at);
    if (at != k || std::binary_search(meta_followed_.begin(), meta_followed_.end(), prev)) continue;
    encode_piece(word.substr(start, k - start), out);
    start = k;
  }
  encode_piece(word.substr(start), out);
}

void Bpe::encode_piece(std::string_view word, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  if (cacheable && cache_.get(word, out)) return;
  std::size_t before = out.size();
  encode_uncached(word, out);
  if (cacheable) cache_.put(word, out.data() + before, out.size() - before);
}

namespace {

struct Symbol {
  TokenId id;
  int prev;
  int next;
  std::uint32_t len;  // bytes; 0 once merged away
};

struct Merge {
  std::int32_t rank;
  std::int32_t pos;
  TokenId new_id;
  bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void Bpe::encode_uncached(std::string_view word, std::vector<TokenId>& out) const {
  if (ignore_merges_) {
    const TokenId* whole = nullptr;
    if (byte_level_) {
      std::string mapped;
      for (char c : word) mapped += byte_chars_[static_cast<unsigned char>(c)];
      whole = vocab_find(mapped);
    } else {
      whole = vocab_find(word);
    }
    if (whole) {
      out.push_back(*whole);
      return;
    }
  }

  thread_local std::vector<Symbol> syms;
  syms.clear();
  auto add = [&](TokenId id, std::uint32_t len) {
    int idx = static_cast<int>(syms.size());
    syms.push_back(Symbol{id, idx - 1, idx + 1, len});
  };

  // Initial symbols, following the Rust BPE::merge_word (including where a pending unk goes).
  bool have_unk = false;
  std::uint32_t unk_len = 0;
  std::size_t i = 0;
  std::string ch_buf;
  while (i < word.size()) {
    std::size_t start = i;
    std::string_view ch;
    TokenId id = -1;
    if (byte_level_) {
      auto b = static_cast<unsigned char>(word[i]);
      ++i;
      id = byte_ids_[b];
      ch = byte_chars_[b];
    } else {
      i += utf8_length(static_cast<unsigned char>(word[i]));
      if (i > word.size()) i = word.size();
      ch = word.substr(start, i - start);
      if (const TokenId* p = vocab_find(ch)) id = *p;
    }
    auto byte_len = static_cast<std::uint32_t>(i - start);
    if (id >= 0) {
      if (have_unk) {
        add(unk_id_, unk_len);
        have_unk = false;
      }
      add(id, byte_len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : ch) add(fallback_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (have_unk && fuse_unk_) {
        unk_len += byte_len;
      } else {
        if (have_unk) add(unk_id_, unk_len);
        have_unk = true;
        unk_len = byte_len;
      }
    }
    // no unk token: the character is dropped (Rust does the same)
  }
  if (have_unk) add(unk_id_, unk_len);
  if (syms.empty()) return;
  syms.back().next = -1;

  if (syms.size() > 1 && pairs_.mask != 0) {
    std::vector<Merge> heap_storage;
    heap_storage.reserve(syms.size() * 2);
    std::priority_queue<Merge, std::vector<Merge>, std::greater<>> queue(std::greater<>{}, std::move(heap_storage));
    for (std::size_t k = 0; k + 1 < syms.size(); ++k) {
      if (const PairValue* v = pairs_.find(syms[k].id, syms[k + 1].id))
        queue.push(Merge{v->rank, static_cast<std::int32_t>(k), v->new_id});
    }
    while (!queue.empty()) {
      Merge top = queue.top();
      queue.pop();
      Symbol& cur = syms[top.pos];
      if (cur.len == 0 || cur.next < 0) continue;
      Symbol& right = syms[cur.next];
      const PairValue* v = pairs_.find(cur.id, right.id);
      if (!v || v->new_id != top.new_id) continue;  // stale entry (Rust checks the same way)
      cur.id = top.new_id;
      cur.len += right.len;
      right.len = 0;
      cur.next = right.next;
      if (cur.next >= 0) syms[cur.next].prev = top.pos;
      if (cur.prev >= 0) {
        if (const PairValue* pv = pairs_.find(syms[cur.prev].id, cur.id))
          queue.push(Merge{pv->rank, cur.prev, pv->new_id});
      }
      if (cur.next >= 0) {
        if (const PairValue* nv = pairs_.find(cur.id, syms[cur.next].id))
          queue.push(Merge{nv->rank, top.pos, nv->new_id});
      }
    }
  }
  for (int k = 0; k >= 0; k = syms[k].next) out.push_back(syms[k].id);
  // A long word (a prompt with no spaces) would otherwise keep its symbols' memory in
  // this thread for good: give it back past a few hundred KB.
  if (syms.capacity() > (std::size_t{1} << 15)) {
    syms.clear();
    syms.shrink_to_fit();
  }
}

}  // namespace memra::tokenizer::detail
