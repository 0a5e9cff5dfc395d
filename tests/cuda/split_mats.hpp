// A GEMV launch's matrices for the emulator tests: `parts` (1 or 3) weights splitting
// `rows` rows (15 / 13 / the rest, in 16-row groups), each with its own output, and the
// outputs gathered back as one [m][rows] result.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/matmul/gemv_mats.hpp"

namespace memra::testing {

class SplitMats {
 public:
  SplitMats(const uint8_t* w, int64_t row_bytes, const float* bias, int64_t rows, int64_t m, int parts)
      : rows_(rows), m_(m), split_{parts == 1 ? rows : 15, parts == 1 ? 0 : 13, parts == 1 ? 0 : rows - 28}, ys_(3) {
    int64_t row0 = 0, groups = 0;
    for (int i = 0; i < memra::ref::GemvMats::kMax; ++i) {
      if (split_[i] > 0) {
        ys_[static_cast<size_t>(i)].assign(static_cast<size_t>(m * split_[i]), NAN);
        ms_.w[i] = reinterpret_cast<uint64_t>(w + row0 * row_bytes);
        ms_.y[i] = reinterpret_cast<uint64_t>(ys_[static_cast<size_t>(i)].data());
        ms_.bias[i] = reinterpret_cast<uint64_t>(bias + row0);
        ms_.rows[i] = split_[i];
        groups += (split_[i] + 15) / 16;
        row0 += split_[i];
      }
      ms_.group_end[i] = groups;
    }
  }
  const memra::ref::GemvMats& mats() const { return ms_; }
  int64_t groups() const { return ms_.group_end[memra::ref::GemvMats::kMax - 1]; }
  // The matrices' outputs as [m][rows].
  std::vector<float> gather() const {
    std::vector<float> y(static_cast<size_t>(m_ * rows_));
    int64_t row0 = 0;
    for (int i = 0; i < memra::ref::GemvMats::kMax; ++i) {
      for (int64_t t = 0; t < m_; ++t)
        for (int64_t r = 0; r < split_[i]; ++r)
          y[static_cast<size_t>(t * rows_ + row0 + r)] = ys_[static_cast<size_t>(i)][static_cast<size_t>(t * split_[i] + r)];
      row0 += split_[i];
    }
    return y;
  }

 private:
  int64_t rows_, m_;
  int64_t split_[3];
  std::vector<std::vector<float>> ys_;
  memra::ref::GemvMats ms_{};
};

}  // namespace memra::testing
