// CPU model of the prefill GEMM (kernels/matmul/gemm_mma.cu): the same operands the
// kernel feeds its tensor cores, multiplied and summed in double. Next to
// matmul_rows (the exact product) it splits the GEMM's error into its two parts:
//  - operand rounding (modelled here exactly): x = hi + lo (split) or hi (bf16),
//    hi = bf16_rn(x), lo = bf16_rn(x - hi); weights dequantized exactly, then bf16
//    weights as they are, others hi + lo (split) or hi (bf16); the kernel sums
//    hi*whi + lo*whi + hi*wlo per element (lo*wlo left out, |lo*wlo| <= 2^-18 |x w|);
//  - the tensor cores' f32 accumulation (the only difference from this model).
#pragma once
#include <cstdint>

#include "repack/quant/ggml_type.hpp"

namespace memra::ref {

enum class GemmPrecision { split, bf16 };

// False when the type has no exact dequantizer or cols breaks its block size.
bool gemm_rows(quant::GgmlType type, const void* w, int64_t rows, int64_t cols, const float* x, int64_t m,
               const float* bias, GemmPrecision precision, float* y);

}  // namespace memra::ref
