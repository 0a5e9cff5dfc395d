// The tensor-core bf16 and fp8 decode GEMVs (kernels/matmul/gemv_mma_bf16.cuh,
// gemv_mma_fp8.cuh) run on the host by gemv_mma_emulator.hpp (no GPU needed): within the
// f32 kernels' bound of an exact product of the bf16-rounded activations, and bit for bit
// what batch invariance and the launch shapes promise — a token's row the same alone and
// among 16, with one n-tile or two, and a matrix's rows the same alone and merged with
// others into one launch; fp8's prepared activations (fp8_act_ref.hpp) equal to x scaled
// inside every block. memra-kernel-check holds the same on the GPU; this runs in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul/fp8_act_ref.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/split_mats.hpp"
#include "tests/cuda/gemv_mma_emulator.hpp"

namespace {

using memra::ref::GemvMats;
namespace emu = memra::cuda::gemv_mma_emu;

constexpr int64_t kRows = 37;  // two whole 16-row tiles and a partial one
constexpr int64_t kMaxM = 16;
constexpr double kBound = 1e-9;  // nmse against the exact product, as the f32 kernels'

float bf16_round(float x) { return memra::quant::bf16_to_f32(memra::quant::f32_to_bf16(x)); }

double nmse(const std::vector<float>& y, const std::vector<double>& ref) {
  double se = 0, sr = 0;
  for (size_t i = 0; i < y.size(); ++i) se += (y[i] - ref[i]) * (y[i] - ref[i]), sr += ref[i] * ref[i];
  return se / sr;
}

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * 4) == 0; }

// A weight in either scheme, its exact values, activations and bias.
struct Problem {
  int64_t cols = 0, row_bytes = 0;
  std::vector<uint8_t> w;
  std::vector<float> wf;  // [kRows][cols] exact weight values
  std::vector<float> x;   // [kMaxM][cols]
  std::vector<uint16_t> plane;  // fp8: x prepared (fp8_act_ref.hpp)
  std::vector<float> back;
  std::vector<float> bias;
  // y [m][kRows] of `m` tokens from x + t0 * cols, exactly (double) from bf16(x).
  std::vector<double> reference(int64_t m, int64_t t0 = 0) const {
    std::vector<double> y(static_cast<size_t>(m * kRows));
    for (int64_t t = 0; t < m; ++t)
      for (int64_t r = 0; r < kRows; ++r) {
        double s = bias[static_cast<size_t>(r)];
        for (int64_t c = 0; c < cols; ++c)
          s += static_cast<double>(bf16_round(x[static_cast<size_t>((t0 + t) * cols + c)])) * wf[static_cast<size_t>(r * cols + c)];
        y[static_cast<size_t>(t * kRows + r)] = s;
      }
    return y;
  }
};

Problem make_problem(bool fp8, int64_t cols, uint32_t seed) {
  Problem p;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  p.cols = cols;
  p.wf.resize(static_cast<size_t>(kRows * cols));
  if (fp8) {
    const int64_t groups = cols / 128;
    p.row_bytes = groups * 4 + cols;
    p.w.resize(static_cast<size_t>(kRows * p.row_bytes));
    std::uniform_int_distribution<int> code(0, 255);
    for (int64_t r = 0; r < kRows; ++r) {
      uint8_t* row = p.w.data() + r * p.row_bytes;
      for (int64_t gi = 0; gi < groups; ++gi) {
        const float s = 0.01f + 0.1f * std::fabs(n(rng));
        std::memcpy(row + 4 * gi, &s, 4);
        for (int64_t c = gi * 128; c < (gi + 1) * 128; ++c) {
          uint8_t q;
          do q = static_cast<uint8_t>(code(rng));
          while ((q & 0x7f) == 0x7f);  // no NaN codes
          row[groups * 4 + c] = q;
          p.wf[static_cast<size_t>(r * cols + c)] = memra::quant::f8_e4m3_to_f32(q) * s;
        }
      }
    }
  } else {
    p.row_bytes = cols * 2;
    p.w.resize(static_cast<size_t>(kRows * p.row_bytes));
    for (int64_t i = 0; i < kRows * cols; ++i) {
      const uint16_t h = memra::quant::f32_to_bf16(n(rng));
      std::memcpy(p.w.data() + 2 * i, &h, 2);
      p.wf[static_cast<size_t>(i)] = memra::quant::bf16_to_f32(h);
    }
  }
  p.x.resize(static_cast<size_t>(kMaxM * cols));
  for (float& v : p.x) v = n(rng);
  for (int64_t r = 0; r < kRows; ++r) p.bias.push_back(0.01f * static_cast<float>(r));
  if (fp8) {
    p.plane.resize(p.x.size());
    p.back.resize(p.x.size() / 128);
    EXPECT_TRUE(memra::ref::prepare_act_fp8(p.x.data(), kMaxM, cols, p.plane.data(), p.back.data()));
  }
  return p;
}

// How a launch runs: the scheme's kernel with NT n-tiles (fp8: prepared or scaled x).
enum class Kernel { bf16, fp8_prepared, fp8_scaled };

// One launch over `parts` matrices splitting the rows (15 / 13 / 9), tokens t0 .. t0+m-1;
// the outputs as [m][kRows].
template <int NT>
std::vector<float> run(const Problem& p, Kernel k, int64_t m, int parts = 1, int64_t t0 = 0) {
  memra::testing::SplitMats split(p.w.data(), p.row_bytes, p.bias.data(), kRows, m, parts);
  const GemvMats& ms = split.mats();
  const float* x = p.x.data() + t0 * p.cols;
  if (k == Kernel::bf16) emu::launch_bf16<NT>(ms, p.cols, x, m);
  if (k == Kernel::fp8_prepared)
    emu::launch_fp8<NT, memra::cuda::gemv_mma::kXPrepared>(ms, p.cols, p.plane.data() + t0 * p.cols, p.back.data() + t0 * (p.cols / 128), m);
  if (k == Kernel::fp8_scaled) emu::launch_fp8<NT, memra::cuda::gemv_mma::kXScaled>(ms, p.cols, x, nullptr, m);
  return split.gather();
}

// The backend's tile for m tokens: one n-tile up to 8, two above.
std::vector<float> run_as_backend(const Problem& p, Kernel k, int64_t m, int parts = 1, int64_t t0 = 0) {
  return m > 8 ? run<2>(p, k, m, parts, t0) : run<1>(p, k, m, parts, t0);
}

void check_kernel(const Problem& p, Kernel k) {
  const std::vector<float> all = run_as_backend(p, k, kMaxM);
  EXPECT_LE(nmse(all, p.reference(kMaxM)), kBound);
  for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{11}}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    // Tokens 2 .. 2+m-1 alone: their rows of the 16-token launch, bit for bit.
    const std::vector<float> some = run_as_backend(p, k, m, 1, 2);
    EXPECT_TRUE(same_bits(some.data(), all.data() + 2 * kRows, some.size())) << "a token's row depends on the batch";
    EXPECT_TRUE(same_bits(run_as_backend(p, k, m, 3, 2).data(), some.data(), some.size())) << "three matrices in one launch";
  }
  // Two n-tiles for 8 tokens: the same rows as one.
  EXPECT_TRUE(same_bits(run<2>(p, k, 8).data(), all.data(), 8 * kRows)) << "the n-tile count changed a row";
}

TEST(TensorCoreGemvEmulated, Bf16WithinBoundAndBatchInvariant) {
  for (const int64_t cols : {int64_t{520}, int64_t{1024}}) {  // 520: a last 32-chunk of 8 elements
    SCOPED_TRACE(testing::Message() << "cols=" << cols);
    check_kernel(make_problem(false, cols, 7 + static_cast<uint32_t>(cols)), Kernel::bf16);
  }
}

TEST(TensorCoreGemvEmulated, Fp8WithinBoundAndBatchInvariant) {
  for (const int64_t cols : {int64_t{512}, int64_t{1024}}) {  // 4 groups over 8 warps: warps without work
    SCOPED_TRACE(testing::Message() << "cols=" << cols);
    check_kernel(make_problem(true, cols, 11 + static_cast<uint32_t>(cols)), Kernel::fp8_prepared);
  }
}

// The prepared activations (written once by their producer) give the bits of x scaled and
// rounded inside every block, the path they replaced, for every token count.
TEST(TensorCoreGemvEmulated, Fp8PreparedActivationsAreTheScaledPath) {
  const Problem p = make_problem(true, 1024, 5);
  for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{16}}) {
    const std::vector<float> prepared = run_as_backend(p, Kernel::fp8_prepared, m), scaled = run<1>(p, Kernel::fp8_scaled, m);
    EXPECT_TRUE(same_bits(prepared.data(), scaled.data(), prepared.size())) << "m=" << m;
  }
}

// Not vacuous: one weight changed changes its row, and only its row.
TEST(TensorCoreGemvEmulated, ACorruptedWeightChangesItsRowOnly) {
  Problem p = make_problem(false, 1024, 3);
  const std::vector<float> before = run<1>(p, Kernel::bf16, 1);
  p.w[static_cast<size_t>(20 * p.row_bytes + 2 * 700 + 1)] ^= 0x40u;  // row 20, element 700's exponent
  const std::vector<float> after = run<1>(p, Kernel::bf16, 1);
  EXPECT_NE(std::memcmp(&before[20], &after[20], 4), 0) << "row 20 should have changed";
  EXPECT_TRUE(same_bits(before.data(), after.data(), 20)) << "rows 0..19 should not";
}

}  // namespace
