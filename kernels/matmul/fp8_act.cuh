// The fp8 GEMV's activations on the device (fp8_act_ref.hpp: prepare_act_fp8, the
// format and the arithmetic): a warp prepares one 128-element group, lane l holding
// elements 4l .. 4l + 3. Used by the standalone memra_prepare_act_fp8_rows
// (matmul8_act.cu) and by the producers that write the plane beside their f32 output
// (kernels/norm/rms_norm.cu, kernels/activation/gated_activation.cu), so every path
// computes the same bits; gemv_mma_fp8.cuh's scaled mode takes the same exponent.
#pragma once

#include <stdint.h>

#include "kernels/common/bf16_pack.cuh"

namespace memra::cuda {

// 2^e as a float, e in [-126, 127].
__device__ __forceinline__ float pow2(int e) { return __int_as_float((e + 127) << 23); }

// The group scale exponent E of a group whose largest |x| is `amax`: amax * 2^E in
// [2^63, 2^64), clamped to [-7, 127] so that 2^E and 2^(120 - E) are normal floats (groups
// below 2^-64 or above 2^70 only, whose products stay normal anyway).
__device__ __forceinline__ int group_exponent(float amax) {
  const int be = static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu);
  return max(-7, min(190 - be, 127));
}

// Every lane of the warp calls this with its four elements v of one group; `element` is
// the lane's first element in the [m][cols] numbering (4 * lane past the group's start).
// plane: the bf16 plane as 4-element quads, back: [m][cols/128].
__device__ __forceinline__ void prepare_vec4_fp8(float4 v, int64_t element, uint2* __restrict__ plane,
                                                 float* __restrict__ back) {
  // From 0, as the reference: a NaN never becomes the maximum.
  float amax = 0.0f;
  amax = fmaxf(amax, fabsf(v.x));
  amax = fmaxf(amax, fabsf(v.y));
  amax = fmaxf(amax, fabsf(v.z));
  amax = fmaxf(amax, fabsf(v.w));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const int e = group_exponent(amax);
  const float up = pow2(e);
  // The quad in the mma's pair order: (0, 2) then (1, 3).
  plane[element >> 2] = make_uint2(pack_bf16(v.x * up, v.z * up), pack_bf16(v.y * up, v.w * up));
  if ((threadIdx.x & 31) == 0) back[element >> 7] = pow2(120 - e);
}

}  // namespace memra::cuda
