// The arithmetic of memra-perplexity: which tokens a sliding window scores, the
// negative log-likelihood of a token under a logits row, and the running figure with
// its uncertainty (docs/FLAGS.md, "memra-perplexity"). No engine: tests check it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace memra::perplexity {

// Windows of `ctx` tokens start at 0, stride, 2*stride, ... while they fit in
// `n_tokens` (at most `chunks` of them when chunks > 0). Each scores its last `stride`
// tokens, predicted by the logits of the position before each, so every scored token
// sees at least ctx - stride tokens of context and none is scored twice.
// Needs 1 <= stride < ctx <= n_tokens (the caller reports the failures).
std::vector<int64_t> window_starts(int64_t n_tokens, int64_t ctx, int64_t stride, int64_t chunks);

// -log softmax(logits)[target], in double (log-sum-exp from the row's maximum).
double token_nll(std::span<const float> logits, int32_t target);

// Mean NLL, PPL = exp(mean) and llama.cpp's uncertainty of it:
// PPL * sqrt((mean(nll^2) - mean^2) / (n - 1)).
class NllStats {
 public:
  void add(double nll) {
    sum_ += nll;
    sum_sq_ += nll * nll;
    ++n_;
  }
  int64_t count() const { return n_; }
  double mean() const { return n_ ? sum_ / static_cast<double>(n_) : 0.0; }
  double ppl() const;
  double ppl_error() const;

 private:
  double sum_ = 0, sum_sq_ = 0;
  int64_t n_ = 0;
};

// The byte offset of the first byte that does not start (or continue) a well-formed
// UTF-8 sequence (RFC 3629: no overlongs, surrogates or code points past U+10FFFF);
// nullopt when `text` is valid UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace memra::perplexity
