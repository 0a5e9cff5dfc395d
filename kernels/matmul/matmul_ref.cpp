#include "kernels/matmul/matmul_ref.hpp"

#include <cctype>
#include <string>
#include <vector>

#include "repack/quant/dequant.hpp"
#include "repack/quant/fp_convert.hpp"

namespace memra::ref {

bool scheme_type(const char* scheme, quant::GgmlType* out) {
  if (!scheme) return false;
  std::string upper(scheme);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return quant::ggml_type_from_name(upper, out);
}

float dot_f32(const float* x, const float* w, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += x[i] * w[i];
  return acc;
}

std::vector<float> bf16_rounded(const float* x, int64_t n) {
  std::vector<float> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) r[static_cast<size_t>(i)] = quant::bf16_to_f32(quant::f32_to_bf16(x[i]));
  return r;
}

bool matmul_rows(quant::GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t m,
                 const float* bias, float* y) {
  uint64_t row_bytes = 0;
  if (!quant::ggml_row_bytes(static_cast<uint32_t>(type), static_cast<uint64_t>(cols), &row_bytes)) return false;
  std::vector<float> wr(static_cast<size_t>(cols));
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    if (!quant::dequantize_row(type, base + row_bytes * static_cast<uint64_t>(r), wr.data(), cols)) return false;
    for (int64_t t = 0; t < m; ++t) {
      const float* xt = x + t * cols;
      double acc = 0.0;
      for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(xt[c]) * static_cast<double>(wr[static_cast<size_t>(c)]);
      if (bias) acc += bias[r];
      y[t * rows + r] = static_cast<float>(acc);
    }
  }
  return true;
}

}  // namespace memra::ref
