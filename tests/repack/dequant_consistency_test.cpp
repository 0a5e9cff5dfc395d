// Every quantized fixture GGUF against the BF16 GGUF it was quantized from:
// F32 tensors are identical, quantized tensors stay within their scheme's error.
// Catches layout mistakes the bit-exact tests might not reach (e.g. Q5_K's high
// bits or Q8_0 on real data), since a misplaced code costs far more than the
// scheme's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "repack/checkpoint/gguf.hpp"
#include "tests/repack/test_util.hpp"

namespace memra::testing {
namespace {

// Largest relative RMS error each scheme may cost on these weights: roughly 2x
// what llama-quantize achieves here (measured: see the test's printed table).
double rel_rmse_bound(const std::string& type) {
  if (type == "Q8_0") return 0.01;
  if (type == "Q6_K") return 0.03;
  if (type == "Q5_K") return 0.06;
  if (type == "Q4_K" || type == "IQ4_XS") return 0.12;
  if (type == "Q4_0") return 0.15;
  return 0;
}

class DequantConsistency : public ::testing::TestWithParam<std::string> {};

TEST_P(DequantConsistency, MatchesBf16Source) {
  MEMRA_REQUIRE_FIXTURES();
  const std::string quant = GetParam();
  auto ref = gguf::File::open(fixture("gguf/llama/llama-BF16.gguf").string());
  auto file = gguf::File::open(fixture("gguf/llama/llama-" + quant + ".gguf").string());
  ASSERT_TRUE(ref.ok()) << ref.error().message;
  ASSERT_TRUE(file.ok()) << file.error().message;
  ASSERT_EQ(ref->tensors().size(), file->tensors().size());
  for (const auto& t : file->tensors()) {
    SCOPED_TRACE(quant + " " + t.name());
    const gguf::Tensor* r = ref->find_tensor(t.name());
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->info->ne, t.info->ne);
    auto a = file->dequantize(t);
    auto b = ref->dequantize(*r);
    ASSERT_TRUE(a.ok() && b.ok());
    const std::string type = quant::ggml_type_name(t.info->type);
    if (type == "F32") {
      EXPECT_EQ(0, std::memcmp(a->data(), b->data(), a->size() * 4)) << "F32 tensor differs from the BF16 file's";
      continue;
    }
    double err = 0, sig = 0;
    for (size_t i = 0; i < a->size(); ++i) {
      const double d = static_cast<double>((*a)[i]) - (*b)[i];
      err += d * d;
      sig += static_cast<double>((*b)[i]) * (*b)[i];
    }
    const double rel = std::sqrt(err / sig);
    std::printf("  %-8s %-28s %-7s rel_rmse %.5f\n", quant.c_str(), t.name().c_str(), type.c_str(), rel);
    ASSERT_GT(rel_rmse_bound(type), 0) << "no bound for " << type;
    EXPECT_LT(rel, rel_rmse_bound(type));
  }
}

INSTANTIATE_TEST_SUITE_P(Dequant, DequantConsistency,
                         ::testing::Values("Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_XS"));

}  // namespace
}  // namespace memra::testing
