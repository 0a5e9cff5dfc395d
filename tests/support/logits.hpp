// Comparing logits rows: relative to a row's scale (the oracle bounds) and bit for bit
// (the exactness contract: batching, chunking, stages and speculation change nothing).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace memra::testing {

// bf16 weights compute on bf16-rounded activations (numeric contract v2, docs/
// ARCHITECTURE.md "Per-scheme numerics"), transformers' reference on float32 ones: the
// logits of the bf16 fixtures differ by 3-6e-3 of each row's max |logit| (greedy ids
// equal); the float32 path (the fixtures repacked to f32, repacked_fixture.hpp) stays
// within 1e-4.
constexpr double kBf16ActivationBound = 1e-2;
// The same for unit-length embedding vectors (the committed bf16 embedding model against
// transformers' float32 vectors): measured max |diff| 8e-4 (1.5e-3 with `dimensions` 64
// renormalised), cosine 1 - 8e-6.
constexpr double kBf16EmbeddingMaxDiff = 5e-3;
constexpr double kBf16EmbeddingCosine = 0.9999;

inline float row_max_abs(const float* r, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(r[i]));
  return m;
}

// max |got - ref| / max |ref| over one row of `vocab` logits.
inline double max_rel_diff(const float* got, const float* ref, size_t vocab) {
  const double scale = row_max_abs(ref, vocab);
  double worst = 0;
  for (size_t v = 0; v < vocab; ++v) worst = std::max(worst, std::fabs(got[v] - ref[v]) / scale);
  return worst;
}
inline double max_rel_diff(const std::vector<float>& got, const float* ref, size_t vocab) {
  return max_rel_diff(got.data(), ref, vocab);
}
inline double max_rel_diff(const std::vector<float>& got, const std::vector<float>& ref) {
  return max_rel_diff(got.data(), ref.data(), std::min(got.size(), ref.size()));
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every row bit for bit (and at least one row: an empty run proves nothing).
inline bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!bitwise_equal(a[i], b[i])) return false;
  return true;
}

// "" when `got` is `want` bit for bit, else how many rows differ and the first one.
inline std::string rows_differing(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got) {
  if (want.empty() || want.size() != got.size())
    return "row counts differ: " + std::to_string(want.size()) + " vs " + std::to_string(got.size());
  size_t bad = 0, first = want.size();
  for (size_t i = 0; i < want.size(); ++i)
    if (!bitwise_equal(want[i], got[i])) {
      ++bad;
      first = std::min(first, i);
    }
  return bad == 0 ? "" : std::to_string(bad) + " of " + std::to_string(want.size()) + " rows differ, first row " + std::to_string(first);
}

}  // namespace memra::testing
