// Speculative decoding's drafters: cheap guesses of the next K tokens that the
// target model then verifies in one multi-token step. One interface for every
// kind (n-gram / prompt lookup here; draft models and MTP heads plug in the same
// way: they only have to propose tokens). A drafter never changes the output —
// verification samples every position exactly as plain decode would.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace memra::engine {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `k` tokens expected to follow `context` (prompt + generated so far).
  virtual std::vector<int32_t> draft(std::span<const int32_t> context, int k) = 0;
};

// Prompt lookup: find the most recent earlier occurrence of the context's last n
// tokens (n from max_n down to min_n) and propose what followed it. No weights.
class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(int max_n = 3, int min_n = 1) : max_n_(max_n), min_n_(min_n) {}
  std::vector<int32_t> draft(std::span<const int32_t> context, int k) override;

 private:
  int max_n_;
  int min_n_;
};

}  // namespace memra::engine
