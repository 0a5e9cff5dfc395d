// quant-fp8's kernel module (matmul_fp8.fatbin beside the plugin): the tensor-core decode
// GEMV (kernels/matmul/gemv_mma_fp8.cuh) over bf16s128 activation rows (memra/quant.h;
// the backend prepares them: memra_prepare_act_fp8_rows or the producing norm), for
// every row count up to 16 tokens per block column (grid.y walks the rest). Rows whose
// codes start 16-byte aligned (row bytes and base) take 16-byte loads, the others 4-byte
// loads of the same values: the choice depends on the weight. Prompt rows take the
// backend's single-pass GEMM over memra_gemm_dequant_fp8's planes (fp8_entries.cuh).
#include "kernels/common/pdl.cuh"
#include "kernels/matmul/gemv_mma_fp8.cuh"

// memra_gemv_fp8_mma_n{1,2}: up to 3 matrices over the same prepared x (GemvMats, 16-row
// tiles), NT n-tiles of 8 tokens per block, 32 * kFp8Warps threads, grid (group_end[2],
// ceil(m / (8 NT))). x: the bf16 plane, back: 2^(120 - E) per (token, group).
#define MEMRA_DEFINE_GEMV_FP8_MMA(NT)                                                                            \
  extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kFp8Warps, 2)                               \
      memra_gemv_fp8_mma_n##NT(const memra::ref::GemvMats ms, int64_t cols, const void* x, const float* back,    \
                               int64_t m) {                                                                      \
    namespace g = memra::cuda::gemv_mma;                                                                         \
    const g::Segment s = g::segment(ms, blockIdx.x);                                                             \
    const auto* w = static_cast<const uint8_t*>(s.w);                                                            \
    const int64_t row_bytes = cols / memra::cuda::kFp8Group * 4 + cols;                                          \
    if (row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0)                                       \
      g::gemv_fp8_tile<NT, true>(w, s.rows, cols, x, back, m, s.y, s.bias, s.row0);                              \
    else                                                                                                         \
      g::gemv_fp8_tile<NT, false>(w, s.rows, cols, x, back, m, s.y, s.bias, s.row0);                             \
  }
MEMRA_DEFINE_GEMV_FP8_MMA(1)
MEMRA_DEFINE_GEMV_FP8_MMA(2)

// The path the prepared x replaced (gemv_mma_fp8.cuh kXScaled: x f32, scaled and
// rounded per block; `back` unused), the production kernel's arithmetic until then:
// memra-kernel-check holds the production kernels bitwise to it and --bench-fp8 times it.
extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kFp8Warps, 2)
    memra_gemv_fp8_scaled_n1(const memra::ref::GemvMats ms, int64_t cols, const void* x, const float* back, int64_t m) {
  namespace g = memra::cuda::gemv_mma;
  const g::Segment s = g::segment(ms, blockIdx.x);
  const auto* w = static_cast<const uint8_t*>(s.w);
  const int64_t row_bytes = cols / memra::cuda::kFp8Group * 4 + cols;
  if (row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0)
    g::gemv_fp8_tile<1, true, 2, g::kXScaled>(w, s.rows, cols, x, back, m, s.y, s.bias, s.row0);
  else
    g::gemv_fp8_tile<1, false, 2, g::kXScaled>(w, s.rows, cols, x, back, m, s.y, s.bias, s.row0);
}

// memra-kernel-check --bench-fp8: other unrolls (groups a lane loads per round) of the
// production path, any warp count up to 8 (the launch's block size), 16-byte aligned rows.
#define MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(U)                                                                        \
  extern "C" __global__ void __launch_bounds__(32 * memra::gemv_mma::kFp8Warps, 2)                                \
      memra_bench_gemv_fp8_u##U##_n1(const memra::ref::GemvMats ms, int64_t cols, const void* x, const float* back, \
                                     int64_t m) {                                                                 \
    namespace g = memra::cuda::gemv_mma;                                                                          \
    const g::Segment s = g::segment(ms, blockIdx.x);                                                              \
    g::gemv_fp8_tile<1, true, U>(static_cast<const uint8_t*>(s.w), s.rows, cols, x, back, m, s.y, s.bias, s.row0); \
  }
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(1)
MEMRA_DEFINE_GEMV_FP8_MMA_BENCH(4)

// The prompt GEMM's dequantiser.
#include "plugins/quant-fp8/fp8_entries.cuh"
