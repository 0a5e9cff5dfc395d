// Runs CUDA kernel code on the host, one CTA at a time, on the fiber CTA of cta_fibers.hpp
// (up to 1024 threads; barriers, shuffles, warp collectives, cp.async), and defines the
// CUDA vocabulary the kernels use (qualifiers, vector types, the correctly rounded f32
// operations, bit casts, integer intrinsics, threadIdx / blockIdx / blockDim / gridDim,
// the dynamic shared memory smem_raw). What it cannot show: timing, and the device's own
// expf/tanhf (the host's stand in). Used by the kernel emulators
// (decode_attention_emulator.hpp, gemv_int8_emulator.hpp, gemv_int8_mma_emulator.hpp), which
// add their kernels' own primitives and include the kernel source last: this header
// defines CUDA's keywords as macros.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "repack/quant/fp_convert.hpp"
#include "tests/cuda/cta_fibers.hpp"
#include "tests/cuda/cta_mma.hpp"

// The CUDA vocabulary.
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n)
#define __shared__ static  // one CTA at a time: a static is the CTA's shared variable
using std::max;
using std::min;
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
struct float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) { return {a, b}; }
struct uint2 {
  uint32_t x, y;
};
inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
struct int4 {
  int x, y, z, w;
};
inline int4 make_int4(int a, int b, int c, int d) { return {a, b, c, d}; }
// Correctly rounded f32 operations (the host's, round to nearest even).
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float(static_cast<uint32_t>(b.bits) << 16); }
// kernels/matmul/fp8_units.cuh's fp8x4_to_float: an e4m3 code's exact value.
inline float cuda_emu_e4m3_to_float(uint8_t code) { return memra::quant::f8_e4m3_to_f32(code); }
using std::isfinite;
// kernels/common/bf16_pack.cuh's pack_bf16 (__floats2bfloat162_rn): lo in the low half.
inline uint32_t cuda_emu_pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(memra::quant::f32_to_bf16(lo)) | (static_cast<uint32_t>(memra::quant::f32_to_bf16(hi)) << 16);
}
struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) { return memra::quant::fp16_to_f32(h.bits); }
inline __half __ushort_as_half(uint16_t bits) { return __half{bits}; }
inline __half __float2half_rn(float x) { return __half{memra::quant::f32_to_fp16(x)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return __nv_bfloat16{memra::quant::f32_to_bf16(x)}; }
// cuda_fp8.h's float -> e4m3 (round to nearest even; __NV_SATFINITE: beyond 448 saturates).
enum { __NV_NOSAT = 0, __NV_SATFINITE = 1 };
enum { __NV_E4M3 = 0, __NV_E5M2 = 1 };
inline uint8_t __nv_cvt_float_to_fp8(float x, int saturation, int kind) {
  if (saturation != __NV_SATFINITE || kind != __NV_E4M3) throw std::logic_error("emulated __nv_cvt_float_to_fp8: e4m3 with saturation only");
  return memra::quant::f32_to_f8_e4m3(x);
}
// prmt (CUDA's __byte_perm): byte n of the result is byte s[n] (0..7, the selector
// nibble's low three bits) of the 8 bytes {y:x}.
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
  return r;
}
// The integer SIMD and funnel-shift intrinsics.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i)
    c += static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(a) >> (8 * i))) *
         static_cast<int>(static_cast<int8_t>(static_cast<uint32_t>(b) >> (8 * i)));
  return c;
}
inline uint32_t __vsub4(uint32_t a, uint32_t b) {  // per byte, modulo 256
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= ((((a >> (8 * i)) & 0xffu) - ((b >> (8 * i)) & 0xffu)) & 0xffu) << (8 * i);
  return r;
}
inline uint32_t __funnelshift_r(uint32_t lo, uint32_t hi, uint32_t shift) {  // shift mod 32
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (shift & 31u));
}
inline uint32_t __funnelshift_rc(uint32_t lo, uint32_t hi, uint32_t shift) {  // shift clamped to 32
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> std::min(shift, 32u));
}
template <class T>
inline T __ldg(const T* p) {
  return *p;
}
template <class T>
inline T __ldcs(const T* p) {
  return *p;
}
struct Dim3Emu {
  unsigned x = 0, y = 0, z = 0;
};
// threadIdx.x reads the running fiber's index; blockDim.x its CTA's size.
struct ThreadIdxView {
  struct X {
    operator unsigned() const { return static_cast<unsigned>(memra::cuda_emu::g_cta->tid()); }
  } x;
};
struct BlockDimView {
  struct X {
    operator unsigned() const { return static_cast<unsigned>(memra::cuda_emu::g_cta->threads()); }
  } x;
  unsigned y = 1, z = 1;
};
inline ThreadIdxView threadIdx;
inline BlockDimView blockDim;
inline Dim3Emu blockIdx, gridDim{1, 1, 1};
inline void __syncthreads() { memra::cuda_emu::g_cta->block_barrier(); }
inline void __syncwarp(unsigned = 0xffffffffu) { memra::cuda_emu::g_cta->warp_barrier(); }
inline float __shfl_xor_sync(unsigned, float v, int offset) { return memra::cuda_emu::g_cta->shfl_xor(v, offset); }
inline int __shfl_xor_sync(unsigned, int v, int offset) {  // the int's bits through the float exchange
  float f;
  std::memcpy(&f, &v, 4);
  f = memra::cuda_emu::g_cta->shfl_xor(f, offset);
  std::memcpy(&v, &f, 4);
  return v;
}
// The CTA's dynamic shared memory (`extern __shared__ ... smem_raw[]` in the kernels).
alignas(16) inline unsigned char smem_raw[256 * 1024];
inline void cp_async16(void* dst, const void* src, int src_bytes) { memra::cuda_emu::g_cta->cp_async(dst, src, src_bytes); }
inline void cp_async_commit() { memra::cuda_emu::g_cta->commit(); }
template <int N>
inline void cp_async_wait() {
  memra::cuda_emu::g_cta->wait_groups(N);
}

inline uint32_t __shfl_xor_sync(unsigned mask, uint32_t v, int offset) {
  return static_cast<uint32_t>(__shfl_xor_sync(mask, static_cast<int>(v), offset));
}
inline int __shfl_up_sync(unsigned, int v, int delta) {
  int all[32];
  memra::cuda_emu::g_cta->warp_gather(v, all);
  const int l = memra::cuda_emu::g_cta->tid() & 31;
  return l >= delta ? all[l - delta] : v;
}
// Fibers switch only at barriers and warp steps, so a read-modify-write is atomic.
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline float __shfl_sync(unsigned, float v, int src) {
  float all[32];
  memra::cuda_emu::g_cta->warp_gather(v, all);
  return all[src & 31];
}

namespace memra::cuda_emu {

// Launches a grid (gx, gy) of `threads`-thread CTAs: body() runs once per thread with
// blockIdx and gridDim set; before each CTA, prepare() (e.g. poisoning its shared memory).
template <class Body, class Prepare>
void launch(unsigned gx, unsigned gy, int threads, Body body, Prepare prepare) {
  Cta& cta = process_cta();
  gridDim.x = gx;
  gridDim.y = gy;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x) {
      blockIdx.x = x;
      blockIdx.y = y;
      prepare();
      cta.run(threads, body);
    }
}

}  // namespace memra::cuda_emu
