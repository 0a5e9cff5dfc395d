// The integer-activation GEMV's CPU reference (kernels/matmul/gemv_int8_ref.hpp) for
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

#include "kernels/matmul/gemv_int8_ref.hpp"
#include "repack/quant/dequant.hpp"
#include "repack/quantize/quantize.hpp"

namespace {

using memra::ref::Int8Scheme;
namespace quant = memra::quant;

struct Case {
  const char* name;
  Int8Scheme scheme;
  quant::GgmlType type;
  bool (*quantize)(const float*, void*, int64_t);
};
const Case kCases[] = {
    {"q8_0", Int8Scheme::q8_0, quant::GgmlType::Q8_0, quant::quantize_q8_0},
    {"q4_0", Int8Scheme::q4_0, quant::GgmlType::Q4_0, quant::quantize_q4_0},
    {"q4_k", Int8Scheme::q4_k, quant::GgmlType::Q4_K, quant::quantize_q4_k},
    {"q5_k", Int8Scheme::q5_k, quant::GgmlType::Q5_K, quant::quantize_q5_k},
    {"q6_k", Int8Scheme::q6_k, quant::GgmlType::Q6_K, quant::quantize_q6_k},
    {"iq4_xs", Int8Scheme::iq4_xs, quant::GgmlType::IQ4_XS, quant::quantize_iq4_xs},
};

// Rows of varied scale, some with an outlier (as memra-kernel-check draws them).
std::vector<uint8_t> weights(const Case& c, std::mt19937& rng, int64_t rows, int64_t cols) {
  const int64_t rb = memra::ref::int8_scheme_row_bytes(c.scheme, cols);
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
  for (const Case& c : kCases) {
    const std::vector<uint8_t> w = weights(c, rng, rows, cols);
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
  for (const Case& c : kCases) {
    const std::vector<uint8_t> w = weights(c, rng, rows, cols);
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
  for (const Case& c : kCases) {
    EXPECT_TRUE(memra::ref::int8_activation_matmul(c.name, 256)) << c.name;
    EXPECT_FALSE(memra::ref::int8_activation_matmul(c.name, 800)) << c.name;
    Int8Scheme s;
    ASSERT_TRUE(memra::ref::int8_scheme(c.name, &s));
    EXPECT_EQ(s, c.scheme);
  }
}

}  // namespace
