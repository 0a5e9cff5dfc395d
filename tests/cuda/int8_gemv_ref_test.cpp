// The integer-activation GEMV's CPU reference (plugins/quant-common/gemv_int8_ref.hpp) for
// every integer scheme, without a GPU: its block decoding against repack's dequantisers
// (activations whose codes are the values themselves, d = 1, so only f32 rounding is
// left), and its int8-activation error against the exact product (the bound
// memra-kernel-check holds the GPU path to). The kernels are held bitwise to this
// reference by memra-kernel-check (check_int8_gemv.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "repack/quant/dequant.hpp"
#include "plugins/quant-common/quantize.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"

namespace {

using memra::ref::Int8Scheme;
namespace quant = memra::quant;

using Case = memra::testing::Int8SchemeCase;

// y[t][r] in double from the dequantised rows.
std::vector<double> exact(const Case& c, const std::vector<uint8_t>& w, int64_t rows, int64_t cols, const std::vector<float>& x, int64_t m,
                          std::vector<double>* magnitude) {
  const int64_t rb = memra::ref::int8_scheme_row_bytes(c.scheme, cols);
  std::vector<float> wf(static_cast<size_t>(cols));
  std::vector<double> y(static_cast<size_t>(m * rows));
  magnitude->assign(y.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(quant::dequantize_row(c.type, w.data() + r * rb, wf.data(), cols));
    for (int64_t t = 0; t < m; ++t) {
      double acc = 0, mag = 0;
      for (int64_t i = 0; i < cols; ++i) {
        const double p = static_cast<double>(wf[static_cast<size_t>(i)]) * x[static_cast<size_t>(t * cols + i)];
        acc += p;
        mag += std::fabs(p);
      }
      y[static_cast<size_t>(t * rows + r)] = acc;
      (*magnitude)[static_cast<size_t>(t * rows + r)] = mag;
    }
  }
  return y;
}

std::vector<float> run(const Case& c, const std::vector<uint8_t>& w, int64_t rows, int64_t cols, const std::vector<float>& x, int64_t m) {
  std::vector<int8_t> q(x.size());
  std::vector<float> meta(static_cast<size_t>(2 * m * (cols / 32))), y(static_cast<size_t>(m * rows));
  EXPECT_TRUE(memra::ref::quantize_act_q8(x.data(), m, cols, q.data(), meta.data()));
  EXPECT_TRUE(memra::ref::gemv_int8(c.scheme, w.data(), rows, cols, q.data(), meta.data(), m, nullptr, y.data()));
  return y;
}

TEST(Int8GemvRef, EverySchemeDecodesItsBlocksAsRepackDoes) {
  std::mt19937 rng(7);
  const int64_t rows = 9, cols = 768, m = 3;
  for (const Case& c : memra::testing::int8_scheme_cases()) {
    const std::vector<uint8_t> w = memra::testing::random_int8_weights(c, rng, rows, cols);
    // Integer activations with a +-127 in every block: d = 1, the codes are x exactly.
    std::vector<float> x(static_cast<size_t>(m * cols));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(rng() % 255) - 127);
    for (size_t b = 0; b < x.size() / 32; ++b) x[32 * b + rng() % 32] = (rng() & 1) ? 127.0f : -127.0f;
    std::vector<double> mag;
    const std::vector<double> want = exact(c, w, rows, cols, x, m, &mag);
    const std::vector<float> got = run(c, w, rows, cols, x, m);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6 * mag[i]) << c.name << " output " << i;  // f32 rounding only
  }
}

TEST(Int8GemvRef, Int8ActivationErrorStaysInTheExistingSchemesRange) {
  std::mt19937 rng(11);
  const int64_t rows = 64, cols = 4096, m = 4;
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (const Case& c : memra::testing::int8_scheme_cases()) {
    const std::vector<uint8_t> w = memra::testing::random_int8_weights(c, rng, rows, cols);
    std::vector<float> x(static_cast<size_t>(m * cols));
    for (float& v : x) v = n(rng);
    std::vector<double> mag;
    const std::vector<double> want = exact(c, w, rows, cols, x, m, &mag);
    const std::vector<float> got = run(c, w, rows, cols, x, m);
    double se = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      se += (got[i] - want[i]) * (got[i] - want[i]);
      ref += want[i] * want[i];
    }
    const double nmse = se / ref;
    std::cout << "[ " << c.name << " ] int8-activation nmse vs the exact product " << nmse << "\n";
    EXPECT_LE(nmse, 5e-4) << c.name;  // memra-kernel-check's bound (test-backend-ops' for MUL_MAT)
  }
}

TEST(Int8GemvRef, RoutingCoversEveryIntegerScheme) {
  for (const Case& c : memra::testing::int8_scheme_cases()) {
    EXPECT_TRUE(memra::ref::int8_activation_matmul(c.name, 256)) << c.name;
    EXPECT_FALSE(memra::ref::int8_activation_matmul(c.name, 800)) << c.name;
    Int8Scheme s;
    ASSERT_TRUE(memra::ref::int8_scheme(c.name, &s));
    EXPECT_EQ(s, c.scheme);
  }
}

}  // namespace
