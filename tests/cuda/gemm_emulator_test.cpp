// The prefill GEMM module (kernels/matmul/gemm_mma.cu, the file itself) on the host CTA
// emulator (no GPU needed). Its weight passes: every scheme's rows dequantised into bf16
// hi / lo planes bit for bit the CPU oracle's values split (and the activation split
// likewise). Its tensor-core product (gemm_mma.cuh's gemm_tile), with its cp.async pipeline,
// swizzled tiles, ldmatrix fragments and mma (tests/cuda/cta_mma.hpp: exact products added
// in k order, a model of the tensor cores), in the three operand modes (A hi only; A hi +
// lo; A and B hi + lo): within the f32 bound of the exact sum of the products the mode
// takes, a token's row the same bits whatever M and the other rows, rows scattered by
// out_rows, the bias added, and nothing stored past M or N. memra-kernel-check holds the
// same on the GPU; this runs in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/gemm_emulator.hpp"  // (last: it defines CUDA's keywords as macros)

namespace {

namespace gemm = memra::cuda::gemm;

constexpr int32_t kM = 150, kN = 136, kK = 200;  // two CTAs each way, the last partial; k: 7 tiles, the last partial

float bf16(uint16_t h) { return memra::quant::bf16_to_f32(h); }

// v = hi + lo planes (lo = bf16(v - bf16(v))), [rows][k].
void split(const std::vector<float>& v, std::vector<uint16_t>& hi, std::vector<uint16_t>& lo) {
  hi.resize(v.size());
  lo.resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    hi[i] = memra::quant::f32_to_bf16(v[i]);
    lo[i] = memra::quant::f32_to_bf16(v[i] - bf16(hi[i]));
  }
}

struct Problem {
  std::vector<uint16_t> ah, al, bh, bl;
  std::vector<float> bias;
  Problem() {
    std::mt19937 rng(29);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> a(static_cast<size_t>(kM) * kK), b(static_cast<size_t>(kN) * kK);
    for (float& x : a) x = n(rng);
    for (float& x : b) x = n(rng);
    split(a, ah, al);
    split(b, bh, bl);
    for (int i = 0; i < kN; ++i) bias.push_back(0.1f * static_cast<float>(i));
  }
};

// Rows 0 .. m-1 of A through gemm_tile<SA, SB>; out [out rows][kN] (poisoned NaN), token t
// stored at out_rows[t] when given.
template <bool SA, bool SB>
std::vector<float> run(const Problem& p, int32_t m, const std::vector<int32_t>* out_rows = nullptr, int32_t out_count = kM) {
  std::vector<float> out(static_cast<size_t>(out_count) * kN, NAN);
  const auto* ah = reinterpret_cast<const __nv_bfloat16*>(p.ah.data());
  const auto* al = reinterpret_cast<const __nv_bfloat16*>(p.al.data());
  const auto* bh = reinterpret_cast<const __nv_bfloat16*>(p.bh.data());
  const auto* bl = reinterpret_cast<const __nv_bfloat16*>(p.bl.data());
  const int32_t* rows = out_rows ? out_rows->data() : nullptr;
  memra::cuda_emu::launch(static_cast<unsigned>((m + gemm::kBM - 1) / gemm::kBM), static_cast<unsigned>((kN + gemm::kBN - 1) / gemm::kBN),
                          gemm::kThreads,
                          [&] { gemm::gemm_tile<SA, SB>(ah, al, kK, m, bh, bl, kK, kN, kK, out.data(), kN, rows, p.bias.data()); },
                          [] { std::memset(smem_raw, 0xff, sizeof smem_raw); });
  return out;
}

// The exact (double) sum of the products the mode takes: hi*hi, + lo*hi (SA), + hi*lo (SB).
std::vector<double> reference(const Problem& p, bool sa, bool sb) {
  std::vector<double> y(static_cast<size_t>(kM) * kN);
  for (int t = 0; t < kM; ++t)
    for (int c = 0; c < kN; ++c) {
      double s = p.bias[static_cast<size_t>(c)];
      for (int k = 0; k < kK; ++k) {
        const size_t ia = static_cast<size_t>(t) * kK + k, ib = static_cast<size_t>(c) * kK + k;
        s += double(bf16(p.ah[ia])) * bf16(p.bh[ib]);
        if (sa) s += double(bf16(p.al[ia])) * bf16(p.bh[ib]);
        if (sb) s += double(bf16(p.ah[ia])) * bf16(p.bl[ib]);
      }
      y[static_cast<size_t>(t) * kN + c] = s;
    }
  return y;
}

template <bool SA, bool SB>
void check_mode() {
  SCOPED_TRACE(testing::Message() << "split A " << SA << ", split B " << SB);
  const Problem p;
  const std::vector<float> all = run<SA, SB>(p, kM);
  const std::vector<double> ref = reference(p, SA, SB);
  double se = 0, sr = 0;
  for (size_t i = 0; i < all.size(); ++i) se += (all[i] - ref[i]) * (all[i] - ref[i]), sr += ref[i] * ref[i];
  EXPECT_LE(se / sr, 1e-12) << "against the exact sum of the mode's products (NaN: an output never stored)";
  // The first 5 tokens alone: the bits they have among 150; nothing stored past them.
  const std::vector<float> five = run<SA, SB>(p, 5);
  EXPECT_EQ(std::memcmp(five.data(), all.data(), 5 * kN * 4), 0) << "a token's row depends on M";
  for (size_t i = 5 * kN; i < five.size(); ++i) ASSERT_TRUE(std::isnan(five[i])) << "stored past M at " << i;
  // Scattered rows: token t at row kM - 1 - t.
  std::vector<int32_t> rows(kM);
  for (int t = 0; t < kM; ++t) rows[static_cast<size_t>(t)] = kM - 1 - t;
  const std::vector<float> scattered = run<SA, SB>(p, kM, &rows);
  for (int t = 0; t < kM; t += 37)
    EXPECT_EQ(std::memcmp(scattered.data() + (kM - 1 - t) * kN, all.data() + t * kN, kN * 4), 0) << "token " << t << " scattered";
}

TEST(PrefillGemmEmulated, FastMode) { check_mode<false, false>(); }
TEST(PrefillGemmEmulated, SplitActivations) { check_mode<true, false>(); }
TEST(PrefillGemmEmulated, SplitActivationsAndWeights) { check_mode<true, true>(); }

// v -> (bf16(v), bf16(v - bf16(v))) as the module's split (a non-finite hi: lo 0).
void split_ref(float v, uint16_t& hi, uint16_t& lo) {
  hi = memra::quant::f32_to_bf16(v);
  const float h = bf16(hi);
  lo = memra::quant::f32_to_bf16(std::isfinite(h) ? v - h : 0.0f);
}

// A weight in `scheme` (rows x k bytes w, row_bytes each) through memra_gemm_dequant_<scheme>
// into planes of leading dimension ld: bitwise the oracle's values (`values`, [rows][k]) split.
template <class Launch>
void expect_planes(const char* scheme, Launch launch, const std::vector<float>& values, int32_t rows, int64_t k) {
  SCOPED_TRACE(scheme);
  const int64_t ld = k + 8;  // a padded plane: the kernel must not touch the pad
  std::vector<uint16_t> hi(static_cast<size_t>(rows * ld), 0x7777), lo(hi.size(), 0x7777);
  const int64_t threads = rows * (k / 8);  // (at least: a thread per unit of 8 or more elements)
  memra::cuda_emu::launch(static_cast<unsigned>((threads + 255) / 256), 1, 256,
                          [&] { launch(reinterpret_cast<__nv_bfloat16*>(hi.data()), reinterpret_cast<__nv_bfloat16*>(lo.data()), ld); },
                          [] {});
  int64_t bad = 0;
  for (int32_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      const size_t at = static_cast<size_t>(r * ld + c);
      uint16_t h = 0x7777, l = 0x7777;
      if (c < k) split_ref(values[static_cast<size_t>(r * k + c)], h, l);
      bad += hi[at] != h || lo[at] != l;
    }
  EXPECT_EQ(bad, 0) << "plane elements differ from the oracle's split values (or the pad was written)";
}

TEST(PrefillGemmEmulated, EverySchemesWeightsDequantiseToTheOraclesValues) {
  constexpr int32_t kRowsW = 5;
  constexpr int64_t kCols = 512;
  std::mt19937 rng(41);
  for (const memra::testing::Int8SchemeCase& c : memra::testing::int8_scheme_cases()) {
    const std::vector<uint8_t> w = memra::testing::random_int8_weights(c, rng, kRowsW, kCols);
    const int64_t rb = memra::ref::int8_scheme_row_bytes(c.scheme, kCols);
    std::vector<float> values(static_cast<size_t>(kRowsW * kCols));
    for (int32_t r = 0; r < kRowsW; ++r)
      ASSERT_TRUE(memra::quant::dequantize_row(c.type, w.data() + r * rb, values.data() + r * kCols, kCols));
    using Fn = void (*)(const uint8_t*, int64_t, int32_t, int64_t, int64_t, __nv_bfloat16*, __nv_bfloat16*);
    const std::string name = c.name;
    const Fn fn = name == "q8_0"   ? memra_gemm_dequant_q8_0
                  : name == "q4_0" ? memra_gemm_dequant_q4_0
                  : name == "q4_k" ? memra_gemm_dequant_q4_k
                  : name == "q5_k" ? memra_gemm_dequant_q5_k
                  : name == "q6_k" ? memra_gemm_dequant_q6_k
                                   : memra_gemm_dequant_iq4_xs;
    expect_planes(c.name, [&](__nv_bfloat16* hi, __nv_bfloat16* lo, int64_t ld) { fn(w.data(), rb, kRowsW, kCols, ld, hi, lo); },
                  values, kRowsW, kCols);
  }
  // memra fp8: per 128 columns an f32 scale, then the codes; values e4m3(q) * scale.
  std::vector<uint8_t> w(static_cast<size_t>(kRowsW * (kCols / 128 * 4 + kCols)));
  std::vector<float> values(static_cast<size_t>(kRowsW * kCols));
  const int64_t rb = kCols / 128 * 4 + kCols;
  std::uniform_int_distribution<int> code(0, 255);
  for (int32_t r = 0; r < kRowsW; ++r)
    for (int64_t g = 0; g < kCols / 128; ++g) {
      const float s = 0.001f * static_cast<float>(1 + code(rng));
      std::memcpy(w.data() + r * rb + 4 * g, &s, 4);
      for (int64_t i = g * 128; i < (g + 1) * 128; ++i) {
        uint8_t q;
        do q = static_cast<uint8_t>(code(rng));
        while ((q & 0x7f) == 0x7f);
        w[static_cast<size_t>(r * rb + kCols / 128 * 4 + i)] = q;
        values[static_cast<size_t>(r * kCols + i)] = memra::quant::f8_e4m3_to_f32(q) * s;
      }
    }
  expect_planes("fp8", [&](__nv_bfloat16* hi, __nv_bfloat16* lo, int64_t ld) { memra_gemm_dequant_fp8(w.data(), rb, kRowsW, kCols, ld, hi, lo); },
                values, kRowsW, kCols);
}

// The activation rows (gathered by index) into the same planes.
TEST(PrefillGemmEmulated, ActivationRowsSplitAsTheOracle) {
  constexpr int32_t kRowsX = 4;
  constexpr int64_t kCols = 2056;  // one thread's stride of 2048 and a tail of 8
  std::mt19937 rng(43);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(6 * kCols));
  for (float& v : x) v = n(rng);
  const std::vector<int32_t> rows = {5, 0, 3, 3};
  std::vector<float> picked;
  for (const int32_t r : rows) picked.insert(picked.end(), x.begin() + r * kCols, x.begin() + (r + 1) * kCols);
  const int64_t ld = kCols + 8;
  std::vector<uint16_t> hi(static_cast<size_t>(kRowsX * ld), 0x7777), lo(hi.size(), 0x7777);
  memra::cuda_emu::launch(kRowsX, 1, 256,
                          [&] {
                            memra_gemm_split_rows(x.data(), kCols, rows.data(), kRowsX, ld, reinterpret_cast<__nv_bfloat16*>(hi.data()),
                                                  reinterpret_cast<__nv_bfloat16*>(lo.data()));
                          },
                          [] {});
  int64_t bad = 0;
  for (int32_t r = 0; r < kRowsX; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      uint16_t h = 0x7777, l = 0x7777;
      if (c < kCols) split_ref(picked[static_cast<size_t>(r * kCols + c)], h, l);
      bad += hi[static_cast<size_t>(r * ld + c)] != h || lo[static_cast<size_t>(r * ld + c)] != l;
    }
  EXPECT_EQ(bad, 0);
}

}  // namespace
