// Integer-activation GEMV module for Q5_K weights (gemv_int8.cuh, the Q4_K kernel with
// the fifth bit; reference gemv_int8_ref.cpp). Entries memra_gemv8_q5_k_r<R>_t<NT> (one
// code vector per lane, partner shuffle) and memra_gemv8_q5_k2_r<R>_t<NT> (both code
// vectors per lane): R weight rows and NT tokens per 128-thread block over up to 3
// matrices (GemvMats); every entry computes a token's row identically.
#include "plugins/quant-common/gemv_int8_blocks.cuh"

#define MEMRA_GEMV8_Q5_K(R, NT)                                                                            \
  extern "C" __global__ void __launch_bounds__(memra::cuda::i8::kThreads) memra_gemv8_q5_k_r##R##_t##NT( \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, \
      int64_t m) {                                                                                       \
    memra::cuda::i8::gemv_q4_k<R, NT, false, true>(ms, row_bytes, cols, xq, xm, m);                      \
  }
#define MEMRA_GEMV8_Q5_K2(R, NT)                                                                           \
  extern "C" __global__ void __launch_bounds__(memra::cuda::i8::kThreads) memra_gemv8_q5_k2_r##R##_t##NT( \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, \
      int64_t m) {                                                                                       \
    memra::cuda::i8::gemv_q4_k<R, NT, true, true>(ms, row_bytes, cols, xq, xm, m);                       \
  }
#define MEMRA_GEMV8_Q5_K_R(R) \
  MEMRA_GEMV8_Q5_K2(R, 1) MEMRA_GEMV8_Q5_K2(R, 2) MEMRA_GEMV8_Q5_K2(R, 4) MEMRA_GEMV8_Q5_K2(R, 8) MEMRA_GEMV8_Q5_K2(R, 16) \
  MEMRA_GEMV8_Q5_K(R, 1) MEMRA_GEMV8_Q5_K(R, 2) MEMRA_GEMV8_Q5_K(R, 4) MEMRA_GEMV8_Q5_K(R, 8) MEMRA_GEMV8_Q5_K(R, 16)
MEMRA_GEMV8_Q5_K_R(1)
MEMRA_GEMV8_Q5_K_R(2)
MEMRA_GEMV8_Q5_K_R(4)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q5_k/q5_k_entries.cuh"
