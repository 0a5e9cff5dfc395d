// The quantizers against llama.cpp: for every tensor llama.cpp quantized in the fixture
// GGUFs, memra's quantization of the same original weights must have a squared
// round-trip error no larger than 1.05x llama.cpp's. Plus the fp8 encoder against a
// brute-force nearest-even oracle, and the quant plugins' quantize slot.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "repack/checkpoint/gguf.hpp"
#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"
#include "plugins/quant-common/quantize.hpp"
#include "tests/repack_format/helpers.hpp"

namespace {

using namespace memra;

quant::GgmlType ggml_of(quant::QuantScheme s) {
  switch (s) {
    case quant::QuantScheme::q8_0: return quant::GgmlType::Q8_0;
    case quant::QuantScheme::q4_0: return quant::GgmlType::Q4_0;
    case quant::QuantScheme::q4_k: return quant::GgmlType::Q4_K;
    case quant::QuantScheme::q5_k: return quant::GgmlType::Q5_K;
    case quant::QuantScheme::q6_k: return quant::GgmlType::Q6_K;
    case quant::QuantScheme::iq4_xs: return quant::GgmlType::IQ4_XS;
    default: return quant::GgmlType::F32;
  }
}

double squared_error(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::pow(static_cast<double>(a[i]) - b[i], 2.0);
  return s;
}

std::vector<float> roundtrip(quant::QuantScheme s, const std::vector<float>& x, int64_t rows, int64_t cols) {
  const uint64_t rb = quant::scheme_row_bytes(s, cols);
  std::vector<uint8_t> q(rb * static_cast<uint64_t>(rows));
  std::string error;
  EXPECT_TRUE(quant::quantize_rows(s, x.data(), rows, cols, q.data(), q.size(), &error)) << error;
  std::vector<float> y(x.size());
  EXPECT_TRUE(quant::dequantize_row(ggml_of(s), q.data(), y.data(), static_cast<int64_t>(x.size())));
  return y;
}

struct Case {
  const char* file;
  quant::QuantScheme scheme;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.file << " " << quant::scheme_name(c.scheme); }

class QuantizeVsLlamaCpp : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeVsLlamaCpp, ErrorNoWorseThanLlamaCppPerTensor) {
  MEMRA_REQUIRE_FIXTURES();
  const Case c = GetParam();
  const auto originals = repack_test::llama_originals_gguf_order();
  auto file = gguf::File::open((memra::testing::fixture("gguf/llama") / c.file).string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  const quant::GgmlType want = ggml_of(c.scheme);
  std::map<std::string, std::pair<double, double>> by_kind;  // tensor kind -> (memra, llama.cpp) error
  int compared = 0;
  for (const gguf::Tensor& t : file->tensors()) {
    if (t.type() != want) continue;
    auto it = originals.find(t.name());
    ASSERT_NE(it, originals.end()) << "no original for " << t.name();
    const auto& orig = it->second;
    ASSERT_EQ(t.info->shape(), orig.shape) << t.name();
    auto theirs = file->dequantize(t);
    ASSERT_TRUE(theirs.ok()) << theirs.error().message;
    const auto rows = static_cast<int64_t>(orig.shape[0]), cols = static_cast<int64_t>(orig.shape[1]);
    const auto mine = roundtrip(c.scheme, orig.values, rows, cols);
    const double e_mine = squared_error(mine, orig.values), e_theirs = squared_error(*theirs, orig.values);
    EXPECT_LE(e_mine, 1.05 * e_theirs) << t.name() << ": memra " << e_mine << " vs llama.cpp " << e_theirs;
    std::string kind = t.name();
    if (kind.starts_with("blk.")) kind = kind.substr(kind.find('.', 4) + 1);
    by_kind[kind].first += e_mine;
    by_kind[kind].second += e_theirs;
    ++compared;
  }
  EXPECT_GT(compared, 0) << "no " << quant::scheme_name(c.scheme) << " tensor in " << c.file;
  for (const auto& [kind, e] : by_kind)
    std::cout << "[ " << quant::scheme_name(c.scheme) << " " << kind << " ] memra/llama.cpp squared error = "
              << e.first / e.second << "\n";
}

INSTANTIATE_TEST_SUITE_P(Quantize, QuantizeVsLlamaCpp,
                         ::testing::Values(Case{"llama-Q8_0.gguf", quant::QuantScheme::q8_0},
                                           Case{"llama-Q4_K_M.gguf", quant::QuantScheme::q4_k},
                                           Case{"llama-Q4_K_M.gguf", quant::QuantScheme::q6_k},
                                           Case{"llama-Q5_K_M.gguf", quant::QuantScheme::q5_k},
                                           Case{"llama-Q6_K.gguf", quant::QuantScheme::q6_k},
                                           Case{"llama-Q4_0.gguf", quant::QuantScheme::q4_0},
                                           Case{"llama-IQ4_XS.gguf", quant::QuantScheme::iq4_xs}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.file).substr(6);
                           n = n.substr(0, n.find('.')) + "_" + quant::scheme_name(info.param.scheme);
                           return n;
                         });

// The BF16 GGUF holds the same weights as the safetensors original: checks the q/k
// un-permutation the comparison above relies on.
TEST(Quantize, OriginalsMatchTheBf16Gguf) {
  MEMRA_REQUIRE_FIXTURES();
  const auto originals = repack_test::llama_originals_gguf_order();
  auto file = gguf::File::open((memra::testing::fixture("gguf/llama/llama-BF16.gguf")).string());
  ASSERT_TRUE(file.ok()) << file.error().message;
  int matched = 0;
  for (const gguf::Tensor& t : file->tensors()) {
    auto it = originals.find(t.name());
    ASSERT_NE(it, originals.end()) << t.name();
    auto v = file->dequantize(t);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, it->second.values) << t.name();
    ++matched;
  }
  EXPECT_EQ(matched, static_cast<int>(originals.size()));
}

// Brute force: the nearest finite e4m3fn value, ties to the even code, saturating.
uint8_t e4m3_oracle(float x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xff : 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(static_cast<double>(x));
  int best = 0;
  double best_d = INFINITY;
  for (int c = 0; c <= 0x7e; ++c) {
    const double v = quant::f8_e4m3_to_f32(static_cast<uint8_t>(c));
    const double d = std::fabs(v - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best_d = d, best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(QuantizeFp8, E4m3EncoderIsNearestEvenWithSaturation) {
  std::vector<float> xs = {0.0f, -0.0f, 448.0f, -448.0f, 449.0f, 464.0f, 465.0f, 1e9f, -1e9f, INFINITY, -INFINITY,
                           0x1p-6f, 0x1p-7f, 0x1p-9f, 0x1p-10f, 0x1.8p-10f, 0x1p-11f, 3 * 0x1p-11f, FLT_MIN, FLT_TRUE_MIN};
  // Every midpoint between neighbouring codes, and just either side of it.
  for (int c = 0; c < 0x7e; ++c) {
    const float lo = quant::f8_e4m3_to_f32(static_cast<uint8_t>(c)), hi = quant::f8_e4m3_to_f32(static_cast<uint8_t>(c + 1));
    const float mid = (lo + hi) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), hi}) {
      xs.push_back(v);
      xs.push_back(-v);
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> expo(-14.0f, 10.0f);
  for (int i = 0; i < 20000; ++i) xs.push_back((i % 2 ? -1.0f : 1.0f) * std::exp2(expo(rng)));
  for (float x : xs) ASSERT_EQ(quant::f32_to_f8_e4m3(x), e4m3_oracle(x)) << "x = " << x;
  EXPECT_EQ(quant::f32_to_f8_e4m3(NAN) & 0x7f, 0x7f);
}

TEST(QuantizeFp8, LayoutV1RoundTripsWithinHalfAStep) {
  const int64_t rows = 3, cols = 384;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = nd(rng);
  x[5] = 0.5f;  // one outlier group
  for (int i = 128; i < 256; ++i) x[i] = 0.0f;  // an all-zero group
  std::vector<uint8_t> q(quant::scheme_row_bytes(quant::QuantScheme::fp8, cols) * rows);
  ASSERT_EQ(q.size(), static_cast<size_t>(rows * (cols / 128 * 4 + cols)));
  std::string error;
  ASSERT_TRUE(quant::quantize_rows(quant::QuantScheme::fp8, x.data(), rows, cols, q.data(), q.size(), &error)) << error;
  const size_t rb = q.size() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < cols / 128; ++g) {
      float scale;
      std::memcpy(&scale, q.data() + r * rb + g * 4, 4);
      float amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(x[r * cols + g * 128 + i]));
      EXPECT_EQ(scale, amax / 448.0f);
      for (int i = 0; i < 128; ++i) {
        const float v = x[r * cols + g * 128 + i];
        const uint8_t code = q[r * rb + cols / 128 * 4 + g * 128 + i];
        EXPECT_EQ(code, scale == 0 ? 0 : e4m3_oracle(v / scale));
        const float y = quant::f8_e4m3_to_f32(code) * scale;
        // e4m3 keeps 3 mantissa bits: half a step is 2^-4 relative, or 2^-10 * scale below the normals.
        EXPECT_LE(std::fabs(y - v), std::max(std::fabs(v) * 0x1p-4f, 0x1p-10f * scale) * 1.0001f);
      }
    }
  }
}

TEST(Quantize, RejectsBadShapesAndNonFiniteValues) {
  std::vector<float> x(256, 0.01f);
  std::vector<uint8_t> q(1024);
  std::string error;
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::q4_k, x.data(), 1, 128, q.data(), q.size(), &error));
  EXPECT_NE(error.find("multiple of 256"), std::string::npos) << error;
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::q6_k, x.data(), 1, 256, q.data(), 100, &error));
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::q4_0, x.data(), 1, 48, q.data(), q.size(), &error));
  EXPECT_NE(error.find("q4_0 needs rows whose length is a multiple of 32 (got 48 columns)"), std::string::npos) << error;
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::iq4_xs, x.data(), 1, 128, q.data(), q.size(), &error));
  EXPECT_NE(error.find("iq4_xs needs rows whose length is a multiple of 256 (got 128 columns)"), std::string::npos) << error;
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::iq4_xs, x.data(), 1, 256, q.data(), 135, &error));
  x[17] = NAN;
  EXPECT_FALSE(quant::quantize_rows(quant::QuantScheme::q8_0, x.data(), 1, 256, q.data(), q.size(), &error));
  EXPECT_NE(error.find("column 17"), std::string::npos) << error;
  for (auto s : {quant::QuantScheme::q4_0, quant::QuantScheme::iq4_xs}) {
    EXPECT_FALSE(quant::quantize_rows(s, x.data(), 1, 256, q.data(), q.size(), &error));
    EXPECT_NE(error.find("column 17"), std::string::npos) << error;
  }
  // Beyond float16's scales: refused, not written as infinities.
  std::vector<float> big(256, 1e9f);
  for (auto s : {quant::QuantScheme::q4_0, quant::QuantScheme::iq4_xs}) {
    EXPECT_FALSE(quant::quantize_rows(s, big.data(), 1, 256, q.data(), q.size(), &error)) << quant::scheme_name(s);
    EXPECT_NE(error.find("too large"), std::string::npos) << error;
  }
}

// Values already on a scheme's grid, and edge blocks (zeros, constants, one spike).
TEST(Quantize, EdgeBlocksRoundTripSensibly) {
  for (auto s : {quant::QuantScheme::q8_0, quant::QuantScheme::q4_0, quant::QuantScheme::q4_k, quant::QuantScheme::q5_k,
                 quant::QuantScheme::q6_k, quant::QuantScheme::iq4_xs}) {
    std::vector<float> zeros(256, 0.0f);
    EXPECT_EQ(roundtrip(s, zeros, 1, 256), zeros) << quant::scheme_name(s);
    std::vector<float> spike(256, 0.0f);
    spike[100] = 3.0f;
    const auto y = roundtrip(s, spike, 1, 256);
    EXPECT_NEAR(y[100], 3.0f, 3.0f * 0.01f) << quant::scheme_name(s);
    EXPECT_NEAR(y[0], 0.0f, 1e-6f) << quant::scheme_name(s);
    std::vector<float> negconst(256, -0.25f);
    for (float v : roundtrip(s, negconst, 1, 256)) EXPECT_NEAR(v, -0.25f, 0.25f * 0.004f) << quant::scheme_name(s);
  }
}

TEST(Quantize, DeterministicAcrossCalls) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(4 * 512);
  for (float& v : x) v = nd(rng);
  for (auto s : {quant::QuantScheme::q8_0, quant::QuantScheme::q4_0, quant::QuantScheme::q4_k, quant::QuantScheme::q5_k,
                 quant::QuantScheme::q6_k, quant::QuantScheme::iq4_xs, quant::QuantScheme::fp8}) {
    std::vector<uint8_t> a(quant::scheme_row_bytes(s, 512) * 4), b(a.size(), 0xee);
    ASSERT_TRUE(quant::quantize_rows(s, x.data(), 4, 512, a.data(), a.size(), nullptr));
    ASSERT_TRUE(quant::quantize_rows(s, x.data(), 4, 512, b.data(), b.size(), nullptr));
    EXPECT_EQ(a, b) << quant::scheme_name(s);
  }
}

// Q4_0 against its definition's reference method (ggml's quantize_row_q4_0_ref, restated
// here from the format: d = a / -8 for the largest-magnitude value a, codes rounded half
// up and clamped to [0, 15]): memra's search scores that scale too, so no block may come
// out worse. Gaussian, heavy-tailed and lopsided blocks.
TEST(QuantizeQ4_0, NoBlockWorseThanTheReferenceMethod) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::student_t_distribution<float> heavy(2.0f);
  const int blocks = 4000;
  std::vector<float> x(32 * blocks);
  for (int b = 0; b < blocks; ++b)
    for (int i = 0; i < 32; ++i) {
      float v = b % 3 == 0 ? nd(rng) : b % 3 == 1 ? 0.01f * heavy(rng) : std::fabs(nd(rng)) - 0.005f;
      x[32 * b + i] = v;
    }
  std::vector<uint8_t> q(18 * blocks);
  ASSERT_TRUE(quant::quantize_rows(quant::QuantScheme::q4_0, x.data(), blocks, 32, q.data(), q.size(), nullptr));
  std::vector<float> y(x.size());
  ASSERT_TRUE(quant::dequantize_row(quant::GgmlType::Q4_0, q.data(), y.data(), static_cast<int64_t>(x.size())));
  double mine_total = 0, ref_total = 0;
  for (int b = 0; b < blocks; ++b) {
    const float* xb = x.data() + 32 * b;
    float amax = 0, a = 0;
    for (int i = 0; i < 32; ++i)
      if (amax < std::fabs(xb[i])) amax = std::fabs(xb[i]), a = xb[i];
    const float d = a / -8, id = d != 0 ? 1.0f / d : 0.0f;
    const float d16 = quant::fp16_to_f32(quant::f32_to_fp16(d));
    double mine = 0, ref = 0;
    for (int i = 0; i < 32; ++i) {
      const int code = std::min(15, static_cast<int>(xb[i] * id + 8.5f));
      ref += std::pow(static_cast<double>(d16 * static_cast<float>(code - 8)) - xb[i], 2.0);
      mine += std::pow(static_cast<double>(y[32 * b + i]) - xb[i], 2.0);
    }
    ASSERT_LE(mine, ref * (1 + 1e-6) + 1e-30) << "block " << b;
    mine_total += mine, ref_total += ref;
  }
  std::cout << "[ q4_0 ] memra/reference squared error = " << mine_total / ref_total << "\n";
  EXPECT_LT(mine_total, 0.95 * ref_total);
}

// Blocks already on a scheme's grid come back exactly: Q4_0 blocks whose largest
// magnitude sits at code 0 (-8 d) or, with no -8, at code 15 (+7 d); IQ4_XS super-blocks
// whose largest sub-block scale is -32 d and whose sub-blocks each use the -127 entry.
TEST(Quantize, OnGridBlocksRoundTripExactly) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> code(0, 15), scale(0, 63), expo(-12, 4);
  for (int trial = 0; trial < 200; ++trial) {
    const float d = std::ldexp(static_cast<float>(1024 + code(rng) * 61) / 1024.0f, expo(rng));  // a float16 value
    ASSERT_EQ(quant::fp16_to_f32(quant::f32_to_fp16(d)), d);
    std::vector<float> x(256);
    for (int b = 0; b < 8; ++b) {
      const bool top = trial % 2 == 1;  // largest magnitude at +7 d instead of -8 d
      for (int i = 0; i < 32; ++i) x[32 * b + i] = d * static_cast<float>(top ? code(rng) % 15 - 7 : code(rng) - 8);
      x[32 * b + (trial + b) % 32] = top ? 7 * d : -8 * d;
    }
    EXPECT_EQ(roundtrip(quant::QuantScheme::q4_0, x, 1, 256), x) << "trial " << trial;
    int l[8];
    for (int b = 0; b < 8; ++b) l[b] = b == trial % 8 ? -32 : scale(rng) - 32;
    for (int b = 0; b < 8; ++b) {
      const float dl = d * static_cast<float>(l[b]);
      for (int i = 0; i < 32; ++i) x[32 * b + i] = dl * static_cast<float>(quant::kIq4nlValues[code(rng)]);
      x[32 * b + (trial + 3 * b) % 32] = dl * -127.0f;
    }
    EXPECT_EQ(roundtrip(quant::QuantScheme::iq4_xs, x, 1, 256), x) << "trial " << trial;
  }
}

// Layout details the dequantizer fixes: element j / j+16 nibble order, the 6-bit
// scales' split between scales_l and scales_h (checked through the exact dequantizer on
// blocks whose sub-blocks all differ), and the zero sub-block inside a non-zero block.
TEST(Quantize, Iq4XsSubBlocksKeepTheirOwnScales) {
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = std::sin(static_cast<float>(i) * 0.7f) * static_cast<float>(1 + (i / 32) % 8) * 0.01f;
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;
  const auto y = roundtrip(quant::QuantScheme::iq4_xs, x, 2, 256);
  for (int i = 64; i < 96; ++i) EXPECT_EQ(y[i], 0.0f) << i;
  for (int b = 0; b < 16; ++b) {
    if (b == 2) continue;
    double se = 0, ss = 0;
    for (int i = 32 * b; i < 32 * b + 32; ++i) se += std::pow(y[i] - x[i], 2.0), ss += std::pow(x[i], 2.0);
    EXPECT_LT(std::sqrt(se / ss), 0.1) << "sub-block " << b;
  }
}

}  // namespace
