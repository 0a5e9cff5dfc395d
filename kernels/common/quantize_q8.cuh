// Warp-level activation quantisation for the fused producers (add_rms_norm, gated
// activations): a warp holds one 32-element block, one element per lane, and writes
// its int8 code and the block's {d, s} exactly as gemv_int8_ref.hpp's quantize_act_q8
// (and kernels/matmul/gemv_int8.cuh's quantize_block8): max and integer sum are exact,
// so who reduces them does not change a bit.
#pragma once

#include <stdint.h>

namespace memra::cuda {

// Every lane of the warp calls this with its element v of block `block` (whole warps).
__device__ __forceinline__ void quantize_lane_q8(float v, int64_t element, int8_t* __restrict__ q,
                                                 float2* __restrict__ meta) {
  float amax = fabsf(v);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float d = __fdiv_rn(amax, 127.0f);
  int qi = d != 0.0f ? __float2int_rn(__fdiv_rn(v, d)) : 0;
  qi = max(-127, min(127, qi));
  int sum = qi;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  q[element] = static_cast<int8_t>(qi);
  if ((threadIdx.x & 31) == 0) meta[element >> 5] = make_float2(d, __fmul_rn(d, static_cast<float>(sum)));
}

}  // namespace memra::cuda
