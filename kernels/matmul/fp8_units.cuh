// memra fp8 (layout v1, docs/FORMAT.md) on the device: per row of `cols` elements,
// cols/128 little-endian f32 scales, then cols e4m3fn codes; element c is
// e4m3(q[c]) * scale[c/128]. The code's value is exact through the hardware
// e4m3x2 -> f16x2 conversion (every e4m3fn value, NaN included, is an f16 value).
// (Without nvcc the conversion comes from the host emulator, tests/cuda/cta_emulator.hpp.)
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif
#include <stdint.h>

namespace memra::cuda {

constexpr int kFp8Group = 128;

#if defined(__CUDACC__)
// Four codes (little-endian bytes of `word`) as exact floats, in order.
__device__ __forceinline__ void fp8x4_to_float(uint32_t word, float* out) {
  const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3);
  const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&lo));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&hi));
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
}
#else
// The host emulator's exact e4m3 -> float (tests/cuda/cta_emulator.hpp).
__device__ __forceinline__ void fp8x4_to_float(uint32_t word, float* out) {
  for (int i = 0; i < 4; ++i) out[i] = cuda_emu_e4m3_to_float(static_cast<uint8_t>(word >> (8 * i)));
}
#endif

}  // namespace memra::cuda
