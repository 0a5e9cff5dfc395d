#include "host/engine/drafter.hpp"

#include <algorithm>

namespace memra::engine {

std::vector<int32_t> NgramDrafter::draft(std::span<const int32_t> context, int k) {
  std::vector<int32_t> out;
  const auto size = static_cast<int64_t>(context.size());
  for (int n = max_n_; n >= min_n_ && out.empty(); --n) {
    if (size <= n) continue;
    const auto tail = context.subspan(static_cast<size_t>(size - n));
    // The most recent earlier match whose continuation exists.
    for (int64_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + start)) continue;
      // Read on past the end of the context into the draft itself: a match d tokens
      // before the end means the text repeats with period d, so the guess continues the
      // period (a loop of one token drafts k tokens, not one).
      for (int64_t i = start + n; static_cast<int>(out.size()) < k; ++i)
        out.push_back(i < size ? context[static_cast<size_t>(i)] : out[static_cast<size_t>(i - size)]);
      break;
    }
  }
  return out;
}

}  // namespace memra::engine
