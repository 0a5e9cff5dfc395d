// The fp8 GEMV's prepared activations, CPU reference (kernels/matmul/fp8_act_ref.hpp):
// the pair order the mma reads, the group exponent and its clamps, the back-scale. The
// device kernels are held bitwise to it by memra-kernel-check (check_fp8_gemv.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/matmul/fp8_act_ref.hpp"
#include "repack/quant/fp_convert.hpp"

namespace {

using memra::ref::fp8_group_exponent;
using memra::ref::prepare_act_fp8;

TEST(Fp8ActRef, GroupExponentPutsTheLargestMagnitudeInto2To63And2To64) {
  for (float amax : {1.0f, 1.5f, 3e-5f, 7e12f, 0.9999f})
    EXPECT_EQ(std::floor(std::log2(std::ldexp(amax, fp8_group_exponent(amax)))), 63.0) << amax;
  EXPECT_EQ(fp8_group_exponent(0.0f), 127);               // zero and tiny groups: clamped
  EXPECT_EQ(fp8_group_exponent(std::ldexp(1.0f, -70)), 127);
  EXPECT_EQ(fp8_group_exponent(std::ldexp(1.0f, 90)), -7);  // huge groups: clamped
}

TEST(Fp8ActRef, PlaneHoldsEachQuadInTheMmaPairOrderScaledByTheGroupExponent) {
  const int64_t m = 2, cols = 256;
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.25f - 9.0f + (i >= 384 ? 1e6f : 0.0f);
  std::vector<uint16_t> plane(x.size());
  std::vector<float> back(static_cast<size_t>(m * cols / 128));
  ASSERT_TRUE(prepare_act_fp8(x.data(), m, cols, plane.data(), back.data()));
  const int slot[4] = {0, 2, 1, 3};
  for (int64_t t = 0; t < m; ++t)
    for (int64_t g = 0; g < cols / 128; ++g) {
      float amax = 0.0f;
      for (int i = 0; i < 128; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(t * cols + g * 128 + i)]));
      const int e = fp8_group_exponent(amax);
      EXPECT_EQ(back[static_cast<size_t>(t * cols / 128 + g)], std::ldexp(1.0f, 120 - e));
      for (int i = 0; i < 128; ++i) {
        const size_t at = static_cast<size_t>(t * cols + g * 128 + (i & ~3) + slot[i & 3]);
        const float want = std::ldexp(x[static_cast<size_t>(t * cols + g * 128 + i)], e);
        EXPECT_EQ(plane[at], memra::quant::f32_to_bf16(want)) << "row " << t << " group " << g << " element " << i;
      }
    }
  EXPECT_FALSE(prepare_act_fp8(x.data(), 1, 200, plane.data(), back.data()));  // not whole groups
}

}  // namespace
