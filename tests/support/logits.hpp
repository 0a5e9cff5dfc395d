// Comparing logits rows: relative to a row's scale (the oracle bounds) and bit for bit
// (the exactness contract: batching, chunking, stages and speculation change nothing).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace memra::testing {

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
