#include "host/tools/memra-perplexity/perplexity.hpp"

#include <algorithm>
#include <cmath>

namespace memra::perplexity {

std::vector<int64_t> window_starts(int64_t n_tokens, int64_t ctx, int64_t stride, int64_t chunks) {
  std::vector<int64_t> starts;
  if (stride < 1 || stride >= ctx || n_tokens < ctx) return starts;
  int64_t k = (n_tokens - ctx) / stride + 1;
  if (chunks > 0) k = std::min(k, chunks);
  for (int64_t i = 0; i < k; ++i) starts.push_back(i * stride);
  return starts;
}

double token_nll(std::span<const float> logits, int32_t target) {
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum) - static_cast<double>(logits[static_cast<size_t>(target)]);
}

double NllStats::ppl() const { return std::exp(mean()); }

double NllStats::ppl_error() const {
  if (n_ < 2) return 0.0;
  const double m = mean();
  const double var = sum_sq_ / static_cast<double>(n_) - m * m;
  return ppl() * std::sqrt(std::max(var, 0.0) / static_cast<double>(n_ - 1));
}

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Length and the allowed range of the second byte (RFC 3629, table 3-7 of Unicode).
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;  // no surrogates
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;  // nothing past U+10FFFF
    else return i;
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    i += len;
  }
  return std::nullopt;
}

}  // namespace memra::perplexity
