// Integer-activation GEMV module for Q4_0 weights (gemv_int8.cuh; reference
// gemv_int8_ref.cpp). Entry memra_gemv8_q4_0_r<R>_t<NT>: R weight rows and NT tokens
// per 128-thread block over up to 3 matrices (GemvMats); every (R, NT) and any
// sharing of a launch computes a token's row identically.
#include "plugins/quant-common/gemv_int8_blocks.cuh"

#define MEMRA_GEMV8_Q4_0(R, NT)                                                                            \
  extern "C" __global__ void __launch_bounds__(memra::cuda::i8::kThreads) memra_gemv8_q4_0_r##R##_t##NT( \
      const memra::ref::GemvMats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, \
      int64_t m) {                                                            \
    memra::cuda::i8::gemv_staged<1, R, NT>(ms, row_bytes, cols, xq, xm, m);                 \
  }
#define MEMRA_GEMV8_Q4_0_R(R) \
  MEMRA_GEMV8_Q4_0(R, 1) MEMRA_GEMV8_Q4_0(R, 2) MEMRA_GEMV8_Q4_0(R, 4) MEMRA_GEMV8_Q4_0(R, 8) MEMRA_GEMV8_Q4_0(R, 16)
MEMRA_GEMV8_Q4_0_R(1)
MEMRA_GEMV8_Q4_0_R(2)
MEMRA_GEMV8_Q4_0_R(4)

// The prompt GEMM's dequantiser and the embedding gather.
#include "plugins/quant-q4_0/q4_0_entries.cuh"
