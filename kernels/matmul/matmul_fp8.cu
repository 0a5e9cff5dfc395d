// Matmul module for memra fp8 weights: the tensor-core decode GEMV (gemv_mma_fp8.cuh),
// bf16 activations, for every row count up to 16 tokens per block column (grid.y walks
// the rest). Rows whose codes start 16-byte aligned (row bytes and base) take 16-byte
// loads, the others 4-byte loads of the same values: the choice depends on the weight.
// Prompt rows take the single-pass GEMM (matmul_gemm's memra_gemm_dequant_fp8).
#include "kernels/matmul/gemv_mma_fp8.cuh"

// memra_gemv_fp8_mma_n{1,2}: up to 3 matrices over the same x (GemvMats, 16-row tiles),
// NT n-tiles of 8 tokens per block, 32 * kFp8Warps threads, grid (group_end[2], ceil(m / (8 NT))).
#define MEMRA_DEFINE_GEMV_FP8_MMA(NT)                                                                            \
  extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kFp8Warps, 2)                               \
      memra_gemv_fp8_mma_n##NT(const memra::ref::GemvMats ms, int64_t cols, const float* x, int64_t m) {        \
    namespace g = memra::cuda::gemv_mma;                                                                         \
    const g::Segment s = g::segment(ms, blockIdx.x);                                                             \
    const auto* w = static_cast<const uint8_t*>(s.w);                                                            \
    const int64_t row_bytes = cols / memra::cuda::kFp8Group * 4 + cols;                                          \
    if (row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0)                                       \
      g::gemv_fp8_tile<NT, true>(w, s.rows, cols, x, m, s.y, s.bias, s.row0);                                    \
    else                                                                                                         \
      g::gemv_fp8_tile<NT, false>(w, s.rows, cols, x, m, s.y, s.bias, s.row0);                                   \
  }
MEMRA_DEFINE_GEMV_FP8_MMA(1)
MEMRA_DEFINE_GEMV_FP8_MMA(2)
// memra-kernel-check --bench-fp8: other unrolls (groups a lane loads per round) and x
// modes (gemv_mma_fp8.cuh XMode), any warp count up to 8 (the launch's block size),
// 16-byte aligned rows.
#define MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(NAME, U, X)                                                              \
  extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kFp8Warps, 2)                               \
      memra_bench_gemv_fp8_##NAME##_n1(const memra::ref::GemvMats ms, int64_t cols, const float* x, int64_t m) { \
    namespace g = memra::cuda::gemv_mma;                                                                         \
    const g::Segment s = g::segment(ms, blockIdx.x);                                                             \
    g::gemv_fp8_tile<1, true, U, g::X>(static_cast<const uint8_t*>(s.w), s.rows, cols, x, m, s.y, s.bias, s.row0); \
  }
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(u1, 1, kXGroupScaled)
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(u4, 4, kXGroupScaled)
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(u2_fixed, 2, kXFixedScale)
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(u2_prepared, 2, kXPrepared)
