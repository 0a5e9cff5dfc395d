// Matmul module for memra fp8 weights: the tensor-core decode GEMV (gemv_mma_fp8.cuh),
// bf16 activations, for every row count up to 16 tokens per block column (grid.y walks
// the rest), and the preparation of its activations (fp8_act_ref.hpp) where no
// producer wrote them. Rows whose codes start 16-byte aligned (row bytes and base) take
// 16-byte loads, the others 4-byte loads of the same values: the choice depends on the
// weight. Prompt rows take the single-pass GEMM (matmul_gemm's memra_gemm_dequant_fp8).
#include "kernels/common/pdl.cuh"
#include "kernels/matmul/gemv_mma_fp8.cuh"

// x [*][cols] f32 (cols % 128 == 0, rows 16-byte aligned) -> plane [m][cols] bf16 in the
// mma's pair order, back [m][cols/128] (fp8_act_ref.hpp). Output row i from x row rows[i]
// (i when rows is NULL), so a mixed step's generated rows are prepared without a gather.
// One warp per 128-element group: grid = ceil(m * cols / 128 / 8) blocks of 256.
extern "C" __global__ void __launch_bounds__(256) memra_prepare_act_fp8_rows(const float* x, int64_t cols, const int32_t* rows,
                                                                            int64_t m, uint2* plane, float* back) {
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t per_row = cols / memra::cuda::kFp8Group;
  if (warp >= m * per_row) return;  // whole warps
  const int64_t i = warp / per_row, gi = warp - i * per_row;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float* src = x + (rows ? static_cast<int64_t>(rows[i]) : i) * cols + gi * memra::cuda::kFp8Group;
  const float4 v = reinterpret_cast<const float4*>(src)[lane];
  memra::cuda::prepare_vec4_fp8(v, i * cols + gi * memra::cuda::kFp8Group + 4 * lane, plane, back);
}

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
