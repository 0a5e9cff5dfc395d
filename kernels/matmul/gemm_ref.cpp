#include "kernels/matmul/gemm_ref.hpp"

#include <cmath>
#include <vector>

#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::ref {
namespace {

struct Split {
  double hi = 0, lo = 0;
};

Split split(float v, bool with_lo) {
  Split s;
  const float h = quant::bf16_to_f32(quant::f32_to_bf16(v));
  s.hi = h;
  if (with_lo && std::isfinite(h)) s.lo = quant::bf16_to_f32(quant::f32_to_bf16(v - h));
  return s;
}

}  // namespace

bool gemm_rows(quant::GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t m,
               const float* bias, GemmPrecision precision, float* y) {
  uint64_t row_bytes = 0;
  if (!quant::ggml_row_bytes(static_cast<uint32_t>(type), static_cast<uint64_t>(cols), &row_bytes)) return false;
  const bool precise = precision == GemmPrecision::split;
  // bf16 weights are exact in bf16: no weight split.
  const bool split_w = precise && type != quant::GgmlType::BF16;
  std::vector<Split> xs(static_cast<size_t>(m * cols));
  for (int64_t i = 0; i < m * cols; ++i) xs[static_cast<size_t>(i)] = split(x[i], precise);
  std::vector<float> wr(static_cast<size_t>(cols));
  std::vector<Split> ws(static_cast<size_t>(cols));
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    if (!quant::dequantize_row(type, base + row_bytes * static_cast<uint64_t>(r), wr.data(), cols)) return false;
    for (int64_t c = 0; c < cols; ++c) ws[static_cast<size_t>(c)] = split(wr[static_cast<size_t>(c)], split_w);
    for (int64_t t = 0; t < m; ++t) {
      const Split* xt = xs.data() + t * cols;
      double acc = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const Split& a = xt[c];
        const Split& b = ws[static_cast<size_t>(c)];
        acc += a.hi * b.hi + a.lo * b.hi + a.hi * b.lo;
      }
      if (bias) acc += bias[r];
      y[t * rows + r] = static_cast<float>(acc);
    }
  }
  return true;
}

}  // namespace memra::ref
