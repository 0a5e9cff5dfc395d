// The prefill GEMM's tensor-core product (kernels/matmul/gemm_mma.cuh, gemm_tile: the
// header itself) on the host CTA emulator (no GPU needed), with its cp.async pipeline,
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

#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)

// The GEMM's primitives over the emulator's shared memory (addresses: offsets into smem_raw).
namespace memra::cuda::gemm {
inline void cp_async16(uint32_t dst, const void* src, int src_bytes) { ::cp_async16(smem_raw + dst, src, src_bytes); }
inline void cp_async_commit() { ::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  ::cp_async_wait<N>();
}
inline void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  uint32_t r[4];
  memra::cuda_emu::ldmatrix_x4(*memra::cuda_emu::g_cta, r, smem_raw + addr, false);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  memra::cuda_emu::mma_m16n8k16(*memra::cuda_emu::g_cta, d, a, b0, b1, false);
}
}  // namespace memra::cuda::gemm

#include "kernels/matmul/gemm_mma.cuh"  // (its #pragma unroll: built with -Wno-unknown-pragmas)

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

}  // namespace
