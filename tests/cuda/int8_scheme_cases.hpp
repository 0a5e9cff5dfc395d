// The integer-activation schemes as the GEMV tests draw them (no GPU needed): each
// scheme's repack quantiser, and rows of random weights of varied scale, some with an
// outlier (as memra-kernel-check draws them), quantised by it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "repack/quant/dequant.hpp"
#include "plugins/quant-common/quantize.hpp"

namespace memra::testing {

struct Int8SchemeCase {
  const char* name;
  ref::Int8Scheme scheme;
  quant::GgmlType type;
  bool (*quantize)(const float*, void*, int64_t);
};

inline const std::vector<Int8SchemeCase>& int8_scheme_cases() {
  static const std::vector<Int8SchemeCase> c = {
      {"q8_0", ref::Int8Scheme::q8_0, quant::GgmlType::Q8_0, quant::quantize_q8_0},
      {"q4_0", ref::Int8Scheme::q4_0, quant::GgmlType::Q4_0, quant::quantize_q4_0},
      {"q4_k", ref::Int8Scheme::q4_k, quant::GgmlType::Q4_K, quant::quantize_q4_k},
      {"q5_k", ref::Int8Scheme::q5_k, quant::GgmlType::Q5_K, quant::quantize_q5_k},
      {"q6_k", ref::Int8Scheme::q6_k, quant::GgmlType::Q6_K, quant::quantize_q6_k},
      {"iq4_xs", ref::Int8Scheme::iq4_xs, quant::GgmlType::IQ4_XS, quant::quantize_iq4_xs},
  };
  return c;
}

inline const Int8SchemeCase& int8_scheme_case(ref::Int8Scheme s) {
  for (const Int8SchemeCase& c : int8_scheme_cases())
    if (c.scheme == s) return c;
  throw std::invalid_argument("no such int8 scheme");
}

inline std::vector<uint8_t> random_int8_weights(const Int8SchemeCase& c, std::mt19937& rng, int64_t rows, int64_t cols) {
  const int64_t rb = ref::int8_scheme_row_bytes(c.scheme, cols);
  std::vector<uint8_t> w(static_cast<size_t>(rows * rb));
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.02f * std::ldexp(1.0f, static_cast<int>(rng() % 9) - 4);
    for (float& v : f) v = n(rng) * scale;
    if (r % 3 == 0) f[rng() % static_cast<size_t>(cols)] *= 20.0f;
    EXPECT_TRUE(c.quantize(f.data(), w.data() + r * rb, cols)) << c.name;
  }
  return w;
}

}  // namespace memra::testing
