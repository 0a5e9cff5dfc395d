// Integer-activation GEMV module for Q4_K weights (gemv_int8.cuh; reference
// gemv_int8_ref.cpp). Entry memra_gemv8_q4_k_r<R>_t<NT>: R weight rows and NT tokens
// per 128-thread block over up to 3 matrices (GemvMats); every (R, NT) and any
// sharing of a launch computes a token's row identically.
#include "plugins/quant-common/gemv_int8_blocks.cuh"
#include "plugins/quant-q4_k/gemv_int8_mma.cuh"

#define MEMRA_GEMV8_Q4_K(R, NT)                                                                            \
  extern "C" __global__ void __launch_bounds__(memra::cuda::i8::kThreads) memra_gemv8_q4_k_r##R##_t##NT( \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, \
      int64_t m) {                                                            \
    memra::cuda::i8::gemv_q4_k<R, NT>(ms, row_bytes, cols, xq, xm, m);                 \
  }
// Variant memra_gemv8_q4_k2_*: gemv_q4_k<R, NT, true> (both code vectors per lane, no shuffle).
#define MEMRA_GEMV8_Q4_K2(R, NT)                                                                           \
  extern "C" __global__ void __launch_bounds__(memra::cuda::i8::kThreads) memra_gemv8_q4_k2_r##R##_t##NT( \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, \
      int64_t m) {                                                            \
    memra::cuda::i8::gemv_q4_k<R, NT, true>(ms, row_bytes, cols, xq, xm, m);                \
  }
#define MEMRA_GEMV8_Q4_K_R(R) \
  MEMRA_GEMV8_Q4_K2(R, 1) MEMRA_GEMV8_Q4_K2(R, 2) MEMRA_GEMV8_Q4_K2(R, 4) MEMRA_GEMV8_Q4_K2(R, 8) MEMRA_GEMV8_Q4_K2(R, 16) \
  MEMRA_GEMV8_Q4_K(R, 1) MEMRA_GEMV8_Q4_K(R, 2) MEMRA_GEMV8_Q4_K(R, 4) MEMRA_GEMV8_Q4_K(R, 8) MEMRA_GEMV8_Q4_K(R, 16)
MEMRA_GEMV8_Q4_K_R(1)
MEMRA_GEMV8_Q4_K_R(2)
MEMRA_GEMV8_Q4_K_R(4)

// Variant memra_gemv8_q4_km<W>_r16_t<NT>: the tensor-core kernel (gemv_int8_mma.cuh), 16
// rows per block, W warps per slot group (128 * W threads; int8_gemv_block_threads).
#define MEMRA_GEMV8_Q4_KM(W, NT)                                                                                \
  extern "C" __global__ void __launch_bounds__(128 * W) memra_gemv8_q4_km##W##_r16_t##NT(                    \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, int64_t m) { \
    memra::cuda::i8mma::gemv_q4_k_mma<NT, W>(ms, row_bytes, cols, xq, xm, m);                                 \
  }
#define MEMRA_GEMV8_Q4_KM_W(W) \
  MEMRA_GEMV8_Q4_KM(W, 1) MEMRA_GEMV8_Q4_KM(W, 2) MEMRA_GEMV8_Q4_KM(W, 4) MEMRA_GEMV8_Q4_KM(W, 8) MEMRA_GEMV8_Q4_KM(W, 16)
MEMRA_GEMV8_Q4_KM_W(1)
MEMRA_GEMV8_Q4_KM_W(2)
// W = 4 holds one n-tile at most (two would spill).
MEMRA_GEMV8_Q4_KM(4, 1) MEMRA_GEMV8_Q4_KM(4, 2) MEMRA_GEMV8_Q4_KM(4, 4) MEMRA_GEMV8_Q4_KM(4, 8)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q4_k/q4_k_entries.cuh"
