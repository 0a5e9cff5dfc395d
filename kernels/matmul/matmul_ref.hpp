// Matmul over a quantised weight, CPU reference: y[t][r] = sum_c x[t][c] * W[r][c]
// (+ bias[r]), W dequantised exactly (repack/quant), the dot products accumulated in
// double so the reference is more accurate than any float32 kernel it judges.
#pragma once
#include <cstdint>
#include <vector>

#include "repack/quant/ggml_type.hpp"

namespace memra::ref {

// A scheme name (lower-case ggml type name) -> ggml type; false for names memra's kernels
// do not know.
bool scheme_type(const char* scheme, quant::GgmlType* out);

// sum_i x[i] * w[i] in float32, in index order from +0 (one rounding per multiply and
// per add): the f32-activation CPU matmul of the quant plugins and the CPU backend's
// prompt rows of integer schemes, one function so both round alike.
float dot_f32(const float* x, const float* w, int64_t n);

// x[0..n) rounded to bf16 (round to nearest even, as __float2bfloat16_rn), as floats:
// the activations of a bf16-activation matmul (ref::bf16_activation_matmul).
std::vector<float> bf16_rounded(const float* x, int64_t n);

// False when the type has no exact dequantizer or cols breaks its block size.
bool matmul_rows(quant::GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t m,
                 const float* bias, float* y);

}  // namespace memra::ref
