// Matmul module for Q8_0 weights: rows starting 16-byte aligned (cols % 256 == 0)
// take the staged whole-chunk path (gemv_q8_0.cuh), others the generic unit GEMV.
// The path depends on the weight's shape only, so a token's bits never depend on M.
#include "plugins/quant-q8_0/gemv_q8_0.cuh"

#define MEMRA_DEFINE_GEMV_Q8_0_NT(NT)                                                                          \
  extern "C" __global__ void __launch_bounds__(32 * memra::cuda::kGemvWarps)                                  \
      memra_gemv_q8_0_t##NT(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x,   \
                            int64_t m, float* y, const float* bias) {                                         \
    if (row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0)                                    \
      memra::cuda::gemv_q8_0_aligned<NT>(w, row_bytes, rows, cols, x, m, y, bias);                            \
    else                                                                                                      \
      memra::cuda::gemv_tile<memra::cuda::SchemeQ8_0, NT>(w, row_bytes, rows, cols, x, m, y, bias);           \
  }

MEMRA_DEFINE_GEMV_Q8_0_NT(1)
MEMRA_DEFINE_GEMV_Q8_0_NT(2)
MEMRA_DEFINE_GEMV_Q8_0_NT(4)
MEMRA_DEFINE_GEMV_Q8_0_NT(8)
MEMRA_DEFINE_GEMV_Q8_0_NT(16)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q8_0/q8_0_entries.cuh"
