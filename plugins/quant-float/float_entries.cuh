// quant-float's prompt-GEMM dequantisers (f32, f16: split planes) and embedding gathers
// (kernels/matmul/scheme_entries.cuh), in matmul_float.fatbin; tests/cuda's emulators
// include this file too.
#pragma once
#include "kernels/matmul/scheme_entries.cuh"

namespace memra_float_entries {
using F32U8 = memra::cuda::FloatUnit<memra::cuda::SchemeF32, 8>;
using F32U1 = memra::cuda::FloatUnit<memra::cuda::SchemeF32, 1>;
using F16U8 = memra::cuda::FloatUnit<memra::cuda::SchemeF16, 8>;
using F16U1 = memra::cuda::FloatUnit<memra::cuda::SchemeF16, 1>;
using BF16U8 = memra::cuda::FloatUnit<memra::cuda::SchemeBF16, 8>;
using BF16U1 = memra::cuda::FloatUnit<memra::cuda::SchemeBF16, 1>;
}  // namespace memra_float_entries

MEMRA_DEFINE_GEMM_DEQUANT(f32, memra_float_entries::F32U8)
MEMRA_DEFINE_GEMM_DEQUANT(f16, memra_float_entries::F16U8)
MEMRA_DEFINE_EMBEDDING(f32_u8, memra_float_entries::F32U8)
MEMRA_DEFINE_EMBEDDING(f32_u1, memra_float_entries::F32U1)
MEMRA_DEFINE_EMBEDDING(f16_u8, memra_float_entries::F16U8)
MEMRA_DEFINE_EMBEDDING(f16_u1, memra_float_entries::F16U1)
MEMRA_DEFINE_EMBEDDING(bf16_u8, memra_float_entries::BF16U8)
MEMRA_DEFINE_EMBEDDING(bf16_u1, memra_float_entries::BF16U1)
