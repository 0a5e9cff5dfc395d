// Pooling a sequence's final hidden states into its embedding, and the vector a
// client gets (OpenAI's `dimensions`: the first N values, renormalised when the model
// normalises, as Matryoshka-trained models such as Qwen3-Embedding are meant to be cut).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "host/engine/embedding_config.hpp"

namespace memra::engine {

// Takes a sequence's rows in position order (last-token pooling: only the last is
// kept); the result depends only on the rows, never on how they were chunked.
class Pooler {
 public:
  Pooler(Pooling pooling, size_t width) : pooling_(pooling), sum_(width, 0.0) {}
  void add(std::span<const float> row);
  std::vector<float> pooled() const;  // the last row, or the mean (sums in double, in position order)
  Pooling pooling() const { return pooling_; }

 private:
  Pooling pooling_;
  std::vector<double> sum_;
  std::vector<float> last_;
  int64_t rows_ = 0;
};

// The first `dimensions` values of `pooled` (all when 0 or more), L2-normalised
// when `normalize` (a zero vector stays zero).
std::vector<float> client_embedding(std::span<const float> pooled, int64_t dimensions, bool normalize);

}  // namespace memra::engine
