// The f32-activation decode GEMVs (matmul_<scheme>.cu over gemv.cuh, gemv_kquant.cuh,
// gemv_q8_0.cuh: the float weights, and the integer schemes' rows the int8 path does not
// take) on the host CTA emulator (no GPU needed), launched as the CUDA backend launches them
// (4 rows per block, the smallest token tile that holds min(m, 16)): within the f32 bound of
// the exact product of the oracle's weights (bf16 weights: of the bf16-rounded activations),
// and a token's row the same bits alone and among 16, whatever tile. memra-kernel-check holds
// the same on the GPU; this runs in CI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/int8_scheme_cases.hpp"
#include "tests/cuda/gemv_mma_emulator.hpp"  // (the emulator and the bf16 mma matmul_float.cu also holds)
#include "plugins/quant-float/matmul_float.cu"    // (their #pragma unroll: built with -Wno-unknown-pragmas)
#include "plugins/quant-iq4_xs/matmul_iq4_xs.cu"
#include "plugins/quant-q4_0/matmul_q4_0.cu"
#include "plugins/quant-q4_k/matmul_q4_k.cu"
#include "plugins/quant-q5_k/matmul_q5_k.cu"
#include "plugins/quant-q6_k/matmul_q6_k.cu"
#include "plugins/quant-q8_0/matmul_q8_0.cu"

namespace {

using Gemv = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const float*, int64_t, float*, const float*);
#define MEMRA_GEMV_TILES(name) \
  { memra_gemv_##name##_t1, memra_gemv_##name##_t2, memra_gemv_##name##_t4, memra_gemv_##name##_t8, memra_gemv_##name##_t16 }

struct Module {
  const char* name;
  Gemv tiles[5];  // NT = 1, 2, 4, 8, 16
};

constexpr int64_t kRows = 13;  // three whole 4-row blocks and a partial one
constexpr int64_t kMaxM = 16;

// y [m][kRows] of tokens t0 .. t0 + m - 1 through the module's tile for m.
std::vector<float> run(const Module& mod, const std::vector<uint8_t>& w, int64_t row_bytes, int64_t cols,
                       const std::vector<float>& x, const std::vector<float>& bias, int64_t m, int64_t t0 = 0) {
  int nt = 1, slot = 0;
  while (nt < std::min<int64_t>(m, 16)) nt *= 2, ++slot;
  std::vector<float> y(static_cast<size_t>(m * kRows), NAN);
  const Gemv fn = mod.tiles[slot];
  memra::cuda_emu::launch(static_cast<unsigned>((kRows + 3) / 4), static_cast<unsigned>((m + nt - 1) / nt), 128,
                          [&] { fn(w.data(), row_bytes, kRows, cols, x.data() + t0 * cols, m, y.data(), bias.data()); }, [] {});
  return y;
}

// The weights' exact values, the activations and the check of one module.
void check(const Module& mod, const std::vector<uint8_t>& w, int64_t row_bytes, int64_t cols, const std::vector<float>& wf,
           bool bf16_x) {
  SCOPED_TRACE(mod.name);
  std::mt19937 rng(47);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kMaxM * cols)), bias(kRows);
  for (float& v : x) v = n(rng);
  for (float& v : bias) v = n(rng);
  const std::vector<float> all = run(mod, w, row_bytes, cols, x, bias, kMaxM);
  double se = 0, sr = 0;
  for (int64_t t = 0; t < kMaxM; ++t)
    for (int64_t r = 0; r < kRows; ++r) {
      double s = bias[static_cast<size_t>(r)];
      for (int64_t c = 0; c < cols; ++c) {
        const float xv = x[static_cast<size_t>(t * cols + c)];
        s += double(bf16_x ? memra::quant::bf16_to_f32(memra::quant::f32_to_bf16(xv)) : xv) * wf[static_cast<size_t>(r * cols + c)];
      }
      const double d = all[static_cast<size_t>(t * kRows + r)] - s;
      se += d * d, sr += s * s;
    }
  EXPECT_LE(se / sr, 1e-11) << "against the exact product (NaN: an output never stored)";
  for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}}) {  // tiles 1, 4 and 8
    const std::vector<float> some = run(mod, w, row_bytes, cols, x, bias, m, 5);
    EXPECT_EQ(std::memcmp(some.data(), all.data() + 5 * kRows, some.size() * 4), 0) << "m=" << m << ": a token's row depends on the batch";
  }
}

TEST(F32ActivationGemvEmulated, IntegerSchemesWithinBoundAndBatchInvariant) {
  const std::vector<Module> modules = {{"q8_0", MEMRA_GEMV_TILES(q8_0)}, {"q4_0", MEMRA_GEMV_TILES(q4_0)},
                                       {"q4_k", MEMRA_GEMV_TILES(q4_k)}, {"q5_k", MEMRA_GEMV_TILES(q5_k)},
                                       {"q6_k", MEMRA_GEMV_TILES(q6_k)}, {"iq4_xs", MEMRA_GEMV_TILES(iq4_xs)}};
  constexpr int64_t kCols = 768;  // three super-blocks
  std::mt19937 rng(53);
  for (const Module& mod : modules) {
    const memra::testing::Int8SchemeCase* c = nullptr;
    for (const auto& k : memra::testing::int8_scheme_cases())
      if (std::string(k.name) == mod.name) c = &k;
    ASSERT_NE(c, nullptr);
    const std::vector<uint8_t> w = memra::testing::random_int8_weights(*c, rng, kRows, kCols);
    const int64_t rb = memra::ref::int8_scheme_row_bytes(c->scheme, kCols);
    std::vector<float> wf(static_cast<size_t>(kRows * kCols));
    for (int64_t r = 0; r < kRows; ++r) ASSERT_TRUE(memra::quant::dequantize_row(c->type, w.data() + r * rb, wf.data() + r * kCols, kCols));
    check(mod, w, rb, kCols, wf, false);
  }
}

TEST(F32ActivationGemvEmulated, FloatWeightsWithinBoundAndBatchInvariant) {
  std::mt19937 rng(59);
  std::normal_distribution<float> n(0.0f, 1.0f);
  struct Float {
    Module mod;
    int bytes;  // 4 f32, 2 f16 or bf16
    bool bf16;
    int64_t cols;  // u8: a multiple of 8; u1: any
  };
  const std::vector<Float> cases = {{{"f32_u8", MEMRA_GEMV_TILES(f32_u8)}, 4, false, 520},
                                    {{"f32_u1", MEMRA_GEMV_TILES(f32_u1)}, 4, false, 517},
                                    {{"f16_u8", MEMRA_GEMV_TILES(f16_u8)}, 2, false, 520},
                                    {{"f16_u1", MEMRA_GEMV_TILES(f16_u1)}, 2, false, 517},
                                    {{"bf16_u1", MEMRA_GEMV_TILES(bf16_u1)}, 2, true, 517}};
  for (const Float& f : cases) {
    std::vector<uint8_t> w(static_cast<size_t>(kRows * f.cols * f.bytes));
    std::vector<float> wf(static_cast<size_t>(kRows * f.cols));
    for (size_t i = 0; i < wf.size(); ++i) {
      float v = n(rng);
      if (f.bytes == 4) {
        std::memcpy(w.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = f.bf16 ? memra::quant::f32_to_bf16(v) : memra::quant::f32_to_fp16(v);
        std::memcpy(w.data() + 2 * i, &h, 2);
        v = f.bf16 ? memra::quant::bf16_to_f32(h) : memra::quant::fp16_to_f32(h);
      }
      wf[i] = v;
    }
    check(f.mod, w, f.cols * f.bytes, f.cols, wf, f.bf16);
  }
}

}  // namespace
