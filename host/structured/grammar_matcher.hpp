// The state of a grammar match after some bytes: the set of parse stacks that are
// still alive (a pushdown automaton run on all alternatives at once). A stack holds
// element positions, the top being the next element to match; every stack in a
// state has a byte set on top, except the empty stack, which means "complete".
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "host/structured/grammar.hpp"

namespace memra::structured {

using Stack = std::vector<uint32_t>;

class MatchState {
 public:
  MatchState() = default;
  // The start of `grammar` (kept alive by the caller).
  static MatchState start(const Grammar& grammar);
  // The state after byte `b`; dead() when no stack takes it.
  MatchState advance(const Grammar& grammar, uint8_t b) const;
  // After all of `bytes` (dead as soon as one byte is refused).
  MatchState advance(const Grammar& grammar, std::string_view bytes) const;
  bool dead() const { return stacks_.empty(); }
  bool complete() const;  // the bytes so far are a whole sentence of the grammar
  // Whether some byte can follow (false: only the end can).
  bool can_continue() const;
  // A byte-exact key of the state (mask caches).
  std::string key() const;
  const std::vector<Stack>& stacks() const { return stacks_; }

 private:
  std::vector<Stack> stacks_;  // sorted, unique
};

// Bounds that keep a pathological grammar from exhausting the machine.
inline constexpr size_t kMaxStacks = 4096;
inline constexpr size_t kMaxStackDepth = 2048;

}  // namespace memra::structured
