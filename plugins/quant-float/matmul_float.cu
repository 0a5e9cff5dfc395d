// Matmul module for plain float weights (f32, f16, bf16). The _u8 kernels need
// cols % 8 == 0 (16-byte loads); the _u1 kernels take any row length. bf16 rows of
// 8-element multiples take the tensor-core GEMV (gemv_mma_bf16.cuh) instead of _u8.
#include "kernels/matmul/gemv.cuh"
#include "kernels/matmul/gemv_mma_bf16.cuh"

namespace {
using namespace memra::cuda;
using F32U8 = FloatUnit<SchemeF32, 8>;
using F32U1 = FloatUnit<SchemeF32, 1>;
using F16U8 = FloatUnit<SchemeF16, 8>;
using F16U1 = FloatUnit<SchemeF16, 1>;
using BF16U1 = FloatUnit<SchemeBF16, 1>;
using BF16U8 = FloatUnit<SchemeBF16, 8>;
}  // namespace

MEMRA_DEFINE_GEMV(f32_u8, F32U8)
MEMRA_DEFINE_GEMV(f32_u1, F32U1)
MEMRA_DEFINE_GEMV(f16_u8, F16U8)
MEMRA_DEFINE_GEMV(f16_u1, F16U1)
MEMRA_DEFINE_GEMV(bf16_u1, BF16U1)
MEMRA_DEFINE_GEMV_BF16_MMA(1)
MEMRA_DEFINE_GEMV_BF16_MMA(2)
// memra-kernel-check --bench-bf16: the tensor-core GEMV in other unroll/warp shapes, and
// the warp-per-row f32-FMA GEMV it replaced.
MEMRA_DEFINE_GEMV(bench_bf16_u8, BF16U8)
MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(4, 8)
MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(1, 16)
MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(2, 32)
MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(4, 16)
MEMRA_DEFINE_GEMV_BF16_MMA_BENCH(1, 32)

// The prompt GEMM's dequantisers and the embedding gathers.
#include "plugins/quant-float/float_entries.cuh"
