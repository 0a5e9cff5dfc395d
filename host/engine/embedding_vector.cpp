#include "host/engine/embedding_vector.hpp"

#include <cmath>

namespace memra::engine {

void Pooler::add(std::span<const float> row) {
  ++rows_;
  if (pooling_ == Pooling::last_token) {
    last_.assign(row.begin(), row.end());
    return;
  }
  for (size_t i = 0; i < row.size() && i < sum_.size(); ++i) sum_[i] += row[i];
}

std::vector<float> Pooler::pooled() const {
  if (pooling_ == Pooling::last_token) return last_;
  std::vector<float> out(sum_.size(), 0.0f);
  if (rows_ == 0) return out;
  for (size_t i = 0; i < sum_.size(); ++i) out[i] = static_cast<float>(sum_[i] / static_cast<double>(rows_));
  return out;
}

std::vector<float> client_embedding(std::span<const float> pooled, int64_t dimensions, bool normalize) {
  const size_t n = dimensions > 0 && static_cast<size_t>(dimensions) < pooled.size() ? static_cast<size_t>(dimensions) : pooled.size();
  std::vector<float> out(pooled.begin(), pooled.begin() + static_cast<std::ptrdiff_t>(n));
  if (!normalize) return out;
  double norm = 0.0;
  for (float v : out) norm += static_cast<double>(v) * v;
  norm = std::sqrt(norm);
  if (norm > 0.0)
    for (float& v : out) v = static_cast<float>(v / norm);
  return out;
}

}  // namespace memra::engine
