// The decode step's add + RMSNorm kernels (kernels/norm/rms_norm.cu, the file itself) on
// the host CTA emulator (no GPU needed), as the CUDA backend launches them: the fused
// forms write the very output of the plain form, and beside it the next matmul's rows
// exactly as the matmul would prepare them itself (int8x32: ref::quantize_act_q8; the fp8
// GEMV's: ref::prepare_act_fp8); a row's bits do not depend on the launch's other rows;
// the output is within the f32 bound of ref::add_rms_norm. memra-kernel-check's "fused
// decode" lines hold the fusion on the GPU; this runs in CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul/fp8_act_ref.hpp"
#include "plugins/quant-common/gemv_int8_ref.hpp"
#include "kernels/norm/rms_norm_ref.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)
#include "kernels/norm/rms_norm.cu"      // (its #pragma unroll: built with -Wno-unknown-pragmas)

namespace {

constexpr int64_t kRows = 3;

// Which kernel: the wide one (a float4 per thread per pass; threads from dim, as the
// backend picks) or the 256-thread row kernel, plain or writing the next matmul's rows.
enum class Form { wide, wide_q8, wide_fp8, row, row_q8 };

struct Out {
  std::vector<float> out, residual;
  std::vector<int8_t> q;
  std::vector<float> meta;  // {d, s} per 32-element block
  std::vector<uint16_t> plane;
  std::vector<float> back;
};

struct Inputs {
  int64_t dim;
  std::vector<float> x, residual, w;
  float unit_offset;
};

Inputs inputs(int64_t dim, float unit_offset, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Inputs in{dim, std::vector<float>(static_cast<size_t>(kRows * dim)), std::vector<float>(static_cast<size_t>(kRows * dim)),
            std::vector<float>(static_cast<size_t>(dim)), unit_offset};
  for (float& v : in.x) v = n(rng);
  for (float& v : in.residual) v = 3.0f * n(rng);
  for (float& v : in.w) v = 0.5f + 0.1f * n(rng);
  return in;
}

// Rows first .. first + rows - 1 through one launch of `form`.
Out run(const Inputs& in, Form form, int64_t first = 0, int64_t rows = kRows) {
  const int64_t dim = in.dim, n = rows * dim;
  Out o;
  o.out.assign(static_cast<size_t>(n), NAN);
  o.residual.assign(in.residual.begin() + first * dim, in.residual.begin() + (first + rows) * dim);
  o.q.assign(static_cast<size_t>(n), 0x55);
  o.meta.assign(static_cast<size_t>(n / 16), NAN);
  o.plane.assign(static_cast<size_t>(n), 0x5555);
  o.back.assign(static_cast<size_t>(n / 128), NAN);
  const float* x = in.x.data() + first * dim;
  float* r = o.residual.data();
  auto* meta = reinterpret_cast<float2*>(o.meta.data());
  auto* plane = reinterpret_cast<uint2*>(o.plane.data());
  const float eps = 1e-6f, uo = in.unit_offset;
  const bool wide = form == Form::wide || form == Form::wide_q8 || form == Form::wide_fp8;
  const int threads = wide ? static_cast<int>(std::min<int64_t>(1024, (dim / 4 + 31) / 32 * 32)) : 256;
  memra::cuda_emu::launch(static_cast<unsigned>(rows), 1, threads,
                          [&] {
                            switch (form) {
                              case Form::wide: memra_add_rms_norm_wide(x, r, in.w.data(), dim, eps, uo, o.out.data()); break;
                              case Form::wide_q8:
                                memra_add_rms_norm_wide_q8(x, r, in.w.data(), dim, eps, uo, o.out.data(), o.q.data(), meta);
                                break;
                              case Form::wide_fp8:
                                memra_add_rms_norm_wide_fp8(x, r, in.w.data(), dim, eps, uo, o.out.data(), plane, o.back.data());
                                break;
                              case Form::row: memra_add_rms_norm(x, r, in.w.data(), dim, eps, uo, o.out.data()); break;
                              case Form::row_q8: memra_add_rms_norm_q8(x, r, in.w.data(), dim, eps, uo, o.out.data(), o.q.data(), meta); break;
                            }
                          },
                          [] {});
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

double nmse(const std::vector<float>& y, const std::vector<float>& ref) {
  double se = 0, sr = 0;
  for (size_t i = 0; i < y.size(); ++i) se += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]), sr += double(ref[i]) * ref[i];
  return se / sr;
}

void check(const Inputs& in, Form plain, Form q8, bool fp8) {
  const int64_t dim = in.dim;
  const Out p = run(in, plain);
  // The reference's add and norm.
  std::vector<float> rres = in.residual, rout(in.x.size());
  memra::ref::add_rms_norm(in.x.data(), rres.data(), in.w.data(), kRows, dim, 1e-6f, in.unit_offset, rout.data());
  EXPECT_TRUE(same_bits(p.residual, rres)) << "residual += x";
  EXPECT_LE(nmse(p.out, rout), 1e-12);
  // Row 1 alone: the bits it has among three.
  const Out alone = run(in, plain, 1, 1);
  EXPECT_TRUE(std::equal(alone.out.begin(), alone.out.end(), p.out.begin() + dim,
                         [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
      << "a row depends on the launch's other rows";
  // The int8x32 rows: the output unchanged, its codes the reference quantisation of it.
  const Out f = run(in, q8);
  EXPECT_TRUE(same_bits(f.out, p.out)) << "the q8 form changed the output";
  std::vector<int8_t> q(p.out.size());
  std::vector<float> meta(p.out.size() / 16);
  ASSERT_TRUE(memra::ref::quantize_act_q8(p.out.data(), kRows, dim, q.data(), meta.data()));
  EXPECT_EQ(f.q, q) << "int8 codes";
  EXPECT_TRUE(same_bits(f.meta, meta)) << "{d, s} per block";
  if (!fp8) return;
  const Out g = run(in, Form::wide_fp8);
  EXPECT_TRUE(same_bits(g.out, p.out)) << "the fp8 form changed the output";
  std::vector<uint16_t> plane(p.out.size());
  std::vector<float> back(p.out.size() / 128);
  ASSERT_TRUE(memra::ref::prepare_act_fp8(p.out.data(), kRows, dim, plane.data(), back.data()));
  EXPECT_EQ(g.plane, plane) << "bf16 plane";
  EXPECT_TRUE(same_bits(g.back, back)) << "2^(120 - E) per group";
}

TEST(AddRmsNormEmulated, WideFormsWriteTheOutputAndTheNextMatmulsRows) {
  for (const int64_t dim : {int64_t{256}, int64_t{1024}, int64_t{4096}, int64_t{5120}})  // 5120: 1024 threads, 5 float4s for some
    for (const float uo : {0.0f, 1.0f}) {
      SCOPED_TRACE(testing::Message() << "dim=" << dim << " unit_offset=" << uo);
      check(inputs(dim, uo, static_cast<uint32_t>(dim) + (uo != 0.0f)), Form::wide, Form::wide_q8, true);
    }
}

TEST(AddRmsNormEmulated, RowFormsWriteTheOutputAndTheNextMatmulsRows) {
  for (const int64_t dim : {int64_t{256}, int64_t{2304}}) {
    SCOPED_TRACE(testing::Message() << "dim=" << dim);
    check(inputs(dim, 0.0f, 3 + static_cast<uint32_t>(dim)), Form::row, Form::row_q8, false);
  }
}

}  // namespace
