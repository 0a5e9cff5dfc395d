// The tensor-core Q4_K decode GEMV (plugins/quant-q4_k/gemv_int8_mma.cuh, memra_gemv8_q4_km<W>)
// run on the host by gemv_int8_mma_emulator.hpp (no GPU needed): every warp shape W and
// token tile, one block per 16-row tile and fewer persistent blocks, one matrix and three
// in one launch (GemvMats), each result bitwise ref::gemv_int8 — the property
// memra-kernel-check holds on the GPU, here in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/split_mats.hpp"
#include "tests/cuda/gemv_int8_mma_emulator.hpp"

namespace {

using memra::ref::GemvMats;
using memra::ref::Int8Scheme;

constexpr int64_t kRows = 37, kCols = 4352;  // 17 super-blocks: a second, partial phase
constexpr int64_t kMaxM = 16;

struct Problem {
  int64_t row_bytes = memra::ref::int8_scheme_row_bytes(Int8Scheme::q4_k, kCols);
  std::vector<uint8_t> w;
  std::vector<int8_t> xq;
  std::vector<float> meta;
  std::vector<float> bias;
  std::vector<float> yref;  // [kMaxM][kRows]
};

const Problem& problem() {
  static const Problem p = [] {
    Problem q;
    std::mt19937 rng(20261206);
    std::normal_distribution<float> n(0.0f, 1.0f);
    q.w = memra::testing::random_int8_weights(memra::testing::int8_scheme_case(Int8Scheme::q4_k), rng, kRows, kCols);
    std::vector<float> x(static_cast<size_t>(kMaxM * kCols));
    for (float& v : x) v = n(rng);
    q.xq.resize(x.size());
    q.meta.resize(x.size() / 32 * 2);
    EXPECT_TRUE(memra::ref::quantize_act_q8(x.data(), kMaxM, kCols, q.xq.data(), q.meta.data()));
    for (int64_t r = 0; r < kRows; ++r) q.bias.push_back(0.01f * static_cast<float>(r));
    q.yref.resize(static_cast<size_t>(kMaxM * kRows));
    EXPECT_TRUE(memra::ref::gemv_int8(Int8Scheme::q4_k, q.w.data(), kRows, kCols, q.xq.data(), q.meta.data(), kMaxM,
                                      q.bias.data(), q.yref.data()));
    return q;
  }();
  return p;
}

// The launch over `parts` matrices that split the rows (their groups of 16 rows follow each
// other), grid gx (0: one block per group); the first m tokens' outputs as [m][kRows].
template <int NT, int W>
std::vector<float> run(int64_t m, int parts, unsigned gx) {
  const Problem& p = problem();
  memra::testing::SplitMats split(p.w.data(), p.row_bytes, p.bias.data(), kRows, m, parts);
  memra::cuda::i8mma_emu::launch<NT, W>(gx ? gx : static_cast<unsigned>(split.groups()), split.mats(), p.row_bytes, kCols,
                                         p.xq.data(), reinterpret_cast<const float2*>(p.meta.data()), m);
  return split.gather();
}

template <int NT, int W>
void expect_bitwise(int64_t m, int parts, unsigned gx) {
  const std::vector<float> y = run<NT, W>(m, parts, gx);
  const Problem& p = problem();
  int64_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i) bad += std::memcmp(&y[i], &p.yref[i], 4) != 0;
  EXPECT_EQ(bad, 0) << "W=" << W << " NT=" << NT << " m=" << m << " matrices=" << parts << " grid=" << gx << ": " << bad
                    << " of " << y.size() << " outputs differ from the reference (first: " << y[0] << " vs " << p.yref[0] << ")";
}

template <int W>
void every_tile() {
  for (const unsigned gx : {0u, 2u})
    for (const int parts : {1, 3}) {
      expect_bitwise<1, W>(1, parts, gx);
      expect_bitwise<2, W>(2, parts, gx);
      expect_bitwise<4, W>(3, parts, gx);
      expect_bitwise<8, W>(8, parts, gx);
      if constexpr (W < 4) expect_bitwise<16, W>(11, parts, gx);  // two n-tiles, the second partial
    }
}

TEST(Int8MmaGemvEmulated, OneWarpPerSlotGroupIsBitwiseTheReference) { every_tile<1>(); }
TEST(Int8MmaGemvEmulated, TwoWarpsPerSlotGroupAreBitwiseTheReference) { every_tile<2>(); }
TEST(Int8MmaGemvEmulated, FourWarpsPerSlotGroupAreBitwiseTheReference) { every_tile<4>(); }

// The emulator is not vacuous: a kernel that read one weight byte wrong would differ.
TEST(Int8MmaGemvEmulated, ACorruptedWeightChangesTheResult) {
  Problem& p = const_cast<Problem&>(problem());
  const size_t at = static_cast<size_t>(p.row_bytes * 5 + 144 * 3 + 16 + 7);  // a code byte of row 5
  const uint8_t saved = p.w[at];
  p.w[at] = static_cast<uint8_t>(saved ^ 0x11u);
  const std::vector<float> y = run<1, 1>(1, 1, 0);
  p.w[at] = saved;
  EXPECT_NE(std::memcmp(&y[5], &p.yref[5], 4), 0) << "row 5 should have changed";
  EXPECT_EQ(std::memcmp(&y[4], &p.yref[4], 4), 0) << "row 4 should not";
}

}  // namespace
