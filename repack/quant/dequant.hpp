// Exact CPU dequantizers for the GGUF block layouts memra accepts.
//
// Every function reproduces gguf-py's numpy dequantization bit for bit: the same
// float32 operations in the same order (e.g. Q4_K is (d*sc)*q - (dmin*m)), compiled
// without FMA contraction. They are the oracle the GPU kernels are checked against.
// Inputs may be unaligned; outputs are float32, one per element, in ggml order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "repack/quant/ggml_type.hpp"

namespace memra::quant {

// Dequantize n elements of `type` (n a multiple of the type's block size).
// Returns false when the type has no exact dequantizer here or n breaks the block size.
bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Per-type entry points; `nb` counts blocks (elements for F32/F16/BF16).
void dequantize_f32(const void* src, float* dst, int64_t n);
void dequantize_f16(const void* src, float* dst, int64_t n);
void dequantize_bf16(const void* src, float* dst, int64_t n);
void dequantize_q4_0(const void* src, float* dst, int64_t nb);
void dequantize_q4_1(const void* src, float* dst, int64_t nb);
void dequantize_q5_0(const void* src, float* dst, int64_t nb);
void dequantize_q5_1(const void* src, float* dst, int64_t nb);
void dequantize_q8_0(const void* src, float* dst, int64_t nb);
void dequantize_q2_k(const void* src, float* dst, int64_t nb);
void dequantize_q3_k(const void* src, float* dst, int64_t nb);
void dequantize_q4_k(const void* src, float* dst, int64_t nb);
void dequantize_q5_k(const void* src, float* dst, int64_t nb);
void dequantize_q6_k(const void* src, float* dst, int64_t nb);
void dequantize_iq4_nl(const void* src, float* dst, int64_t nb);
void dequantize_iq4_xs(const void* src, float* dst, int64_t nb);

// safetensors F8_E4M3 (e4m3fn) -> float32, exact.
void dequantize_f8_e4m3(const void* src, float* dst, int64_t n);

// The IQ4_NL / IQ4_XS non-linear 4-bit codebook.
extern const int8_t kIq4nlValues[16];

}  // namespace memra::quant
