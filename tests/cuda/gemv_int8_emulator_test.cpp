// The integer-activation decode GEMVs of every scheme (kernels/matmul/gemv_int8.cuh,
// gemv_int8_sb.cuh: the dp4a kernels the launch table picks for M = 1..16) and the
// activation quantisation, run on the host by gemv_int8_emulator.hpp (no GPU needed):
// each kernel variant in several (R, NT) shapes, one block per row group and 5 persistent
// blocks, bitwise ref::gemv_int8 (and ref::quantize_act_q8) — the properties
// memra-kernel-check holds on the GPU, here in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/gemv_int8_emulator.hpp"

namespace {

using memra::ref::GemvMats;
using memra::ref::Int8Scheme;

constexpr int64_t kRows = 37, kCols = 4352;  // 17 super-blocks / 136 units: a second, partial phase
constexpr int64_t kMaxM = 16;

// Each scheme's dp4a entries (gemv_int8_emulator.hpp's kernel names).
std::vector<std::string> dp4a_kernels(const memra::testing::Int8SchemeCase& c) {
  if (c.scheme == Int8Scheme::q4_k || c.scheme == Int8Scheme::q5_k) return {c.name, std::string(c.name) + "2"};
  return {c.name};
}

struct Activations {
  std::vector<float> x;  // [kMaxM][kCols]
  std::vector<int8_t> xq;
  std::vector<float> meta;
};

const Activations& activations() {
  static const Activations a = [] {
    Activations r;
    std::mt19937 rng(1206);
    std::normal_distribution<float> n(0.0f, 1.0f);
    r.x.resize(static_cast<size_t>(kMaxM * kCols));
    for (float& v : r.x) v = n(rng);
    for (int64_t b = 0; b < kMaxM * kCols / 32; b += 7) r.x[static_cast<size_t>(32 * b + rng() % 32)] *= 1e3f;  // spikes
    r.xq.resize(r.x.size());
    r.meta.resize(r.x.size() / 32 * 2);
    EXPECT_TRUE(memra::ref::quantize_act_q8(r.x.data(), kMaxM, kCols, r.xq.data(), r.meta.data()));
    return r;
  }();
  return a;
}

template <int R, int NT>
void expect_bitwise(const memra::testing::Int8SchemeCase& c, const std::vector<uint8_t>& w, int64_t row_bytes, const std::vector<float>& bias,
                    const std::vector<float>& yref, int64_t m) {
  const Activations& a = activations();
  const int64_t groups = (kRows + R - 1) / R;
  for (const std::string& kernel : dp4a_kernels(c))
    for (const unsigned gx : {static_cast<unsigned>(groups), 5u}) {
      std::vector<float> y(static_cast<size_t>(m * kRows), NAN);
      GemvMats ms{};
      ms.w[0] = reinterpret_cast<uint64_t>(w.data());
      ms.y[0] = reinterpret_cast<uint64_t>(y.data());
      ms.bias[0] = reinterpret_cast<uint64_t>(bias.data());
      ms.rows[0] = kRows;
      for (int64_t& e : ms.group_end) e = groups;
      ASSERT_TRUE((memra::cuda::i8_emu::launch<R, NT>(kernel, gx, ms, row_bytes, kCols, a.xq.data(),
                                                      reinterpret_cast<const float2*>(a.meta.data()), m)));
      int64_t bad = 0;
      for (size_t i = 0; i < y.size(); ++i) bad += std::memcmp(&y[i], &yref[i], 4) != 0;
      EXPECT_EQ(bad, 0) << kernel << " R=" << R << " NT=" << NT << " m=" << m << " grid=" << gx << ": " << bad << " of "
                        << y.size() << " outputs differ from the reference";
    }
}

TEST(Int8GemvEmulated, EveryDp4aKernelIsBitwiseTheReference) {
  std::mt19937 rng(1207);
  for (const memra::testing::Int8SchemeCase& c : memra::testing::int8_scheme_cases()) {
    const int64_t row_bytes = memra::ref::int8_scheme_row_bytes(c.scheme, kCols);
    const std::vector<uint8_t> w = memra::testing::random_int8_weights(c, rng, kRows, kCols);
    std::vector<float> bias;
    for (int64_t r = 0; r < kRows; ++r) bias.push_back(0.01f * static_cast<float>(r % 7) - 0.03f);
    const Activations& a = activations();
    std::vector<float> yref(static_cast<size_t>(kMaxM * kRows));
    ASSERT_TRUE(memra::ref::gemv_int8(c.scheme, w.data(), kRows, kCols, a.xq.data(), a.meta.data(), kMaxM, bias.data(),
                                      yref.data()));
    // Shapes the launch table uses (R = 2, 4 at every tile) and R = 1; m below or at the tile.
    expect_bitwise<2, 1>(c, w, row_bytes, bias, yref, 1);
    expect_bitwise<4, 2>(c, w, row_bytes, bias, yref, 2);
    expect_bitwise<1, 4>(c, w, row_bytes, bias, yref, 3);
    expect_bitwise<4, 8>(c, w, row_bytes, bias, yref, 8);
    expect_bitwise<2, 16>(c, w, row_bytes, bias, yref, 13);
  }
}

TEST(Int8GemvEmulated, ActivationQuantisationIsBitwiseTheReference) {
  const Activations& a = activations();
  std::vector<int8_t> q(a.x.size(), 0x55);
  std::vector<float> meta(a.meta.size(), NAN);
  memra::cuda::i8_emu::quantize(a.x.data(), kMaxM, kCols, q.data(), reinterpret_cast<float2*>(meta.data()));
  EXPECT_EQ(std::memcmp(q.data(), a.xq.data(), q.size()), 0) << "codes";
  EXPECT_EQ(std::memcmp(meta.data(), a.meta.data(), meta.size() * 4), 0) << "{d, s} per block";
}

}  // namespace
