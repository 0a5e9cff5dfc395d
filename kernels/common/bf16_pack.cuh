// Two floats rounded to bf16 in one 32-bit register: the operand form of the bf16
// tensor-core GEMVs (gemv_mma_bf16.cuh) and of the fp8 GEMV's prepared activations
// (kernels/matmul/fp8_act.cuh), which must round alike to the bit.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif
#include <stdint.h>

namespace memra::cuda {

// lo in the low half; round to nearest even (__float2bfloat16_rn).
// Without nvcc the host emulator (tests/cuda/cta_emulator.hpp) supplies the rounding.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
#if defined(__CUDACC__)
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
#else
  return cuda_emu_pack_bf16(lo, hi);
#endif
}

}  // namespace memra::cuda
