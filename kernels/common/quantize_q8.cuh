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

// The same with four consecutive elements per lane (a float4): eight lanes hold one
// block (lanes 8b..8b+7 of a warp, elements 4 * lane ..). Every lane of the warp calls
// it; `element` is the lane's first element (a multiple of 4).
__device__ __forceinline__ void quantize_vec4_q8(float4 v, int64_t element, int8_t* __restrict__ q,
                                                 float2* __restrict__ meta) {
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float d = __fdiv_rn(amax, 127.0f);
  const float e[4] = {v.x, v.y, v.z, v.w};
  int qi[4];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = d != 0.0f ? __float2int_rn(__fdiv_rn(e[i], d)) : 0;
    qi[i] = max(-127, min(127, c));
    sum += qi[i];
  }
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const uint32_t packed = (static_cast<uint32_t>(qi[0]) & 0xffu) | ((static_cast<uint32_t>(qi[1]) & 0xffu) << 8) |
                          ((static_cast<uint32_t>(qi[2]) & 0xffu) << 16) | (static_cast<uint32_t>(qi[3]) << 24);
  *reinterpret_cast<uint32_t*>(q + element) = packed;
  if ((threadIdx.x & 7) == 0) meta[element >> 5] = make_float2(d, __fmul_rn(d, static_cast<float>(sum)));
}

}  // namespace memra::cuda
