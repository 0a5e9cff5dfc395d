// Device dequantizers, one "unit" (a fixed run of consecutive elements) at a time: the
// contract every weight scheme's unit type follows, the float schemes' units, and the
// byte-loading helpers the block schemes' units (in their quant plugins:
// plugins/quant-common/block_units.cuh) use.
//
// Each scheme S provides kUnit (elements per unit), kBlockElems/kBlockBytes (its
// block layout) and unit(row, u, w) which writes elements [u*kUnit, (u+1)*kUnit)
// of a row into w; the block schemes also octet(row, o, w), elements [8o, 8o+8) with
// the same operations (Octets<S> makes that a unit: the prompt GEMM's weight pass, a
// thread per 16-byte store of the bf16 plane). A scheme's units follow its CPU
// dequantiser operation for operation, and the modules are built with --fmad=false, so
// each value is bitwise the CPU oracle's value, rounded per step. Blocks are read
// bytewise where their sizes break wider alignment.
// Without nvcc (tests/cuda/gemm_emulator.hpp, gemv_f32_emulator_test.cpp) the CUDA types come from the host emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif
#include <stdint.h>

namespace memra::cuda {

__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
__device__ __forceinline__ float load_f16(const uint8_t* p) {
  return __half2float(__ushort_as_half(load_u16(p)));
}

// N bytes from p (aligned to A bytes: 16, 8 or 2) into registers, in wide loads.
template <int N, int A>
__device__ __forceinline__ void load_bytes(const uint8_t* __restrict__ p, uint8_t (&out)[N]) {
  static_assert(N % A == 0, "whole loads only");
  if constexpr (A == 16) {
#pragma unroll
    for (int i = 0; i < N; i += 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(p + i);
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 16; ++j) out[i + j] = static_cast<uint8_t>(w[j / 4] >> (8 * (j % 4)));
    }
  } else if constexpr (A == 8) {
#pragma unroll
    for (int i = 0; i < N; i += 8) {
      const uint2 v = *reinterpret_cast<const uint2*>(p + i);
      const uint32_t w[2] = {v.x, v.y};
#pragma unroll
      for (int j = 0; j < 8; ++j) out[i + j] = static_cast<uint8_t>(w[j / 4] >> (8 * (j % 4)));
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const uint16_t v = *reinterpret_cast<const uint16_t*>(p + i);
      out[i] = static_cast<uint8_t>(v);
      out[i + 1] = static_cast<uint8_t>(v >> 8);
    }
  }
}

__device__ __forceinline__ float f16_bytes(uint8_t lo, uint8_t hi) {
  return __half2float(__ushort_as_half(static_cast<uint16_t>(lo | (hi << 8))));
}

struct SchemeF32 {
  static constexpr int kBlockElems = 1, kBlockBytes = 4;
};
struct SchemeF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
};
struct SchemeBF16 {
  static constexpr int kBlockElems = 1, kBlockBytes = 2;
};

// Plain float formats: U elements per unit (8 when the row length allows 16-byte
// loads, else 1).
template <class S, int U>
struct FloatUnit;

template <int U>
struct FloatUnit<SchemeF32, U> {
  static constexpr int kUnit = U, kBlockElems = 1, kBlockBytes = 4;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const float* p = reinterpret_cast<const float*>(row) + u * U;
    if constexpr (U % 4 == 0) {
#pragma unroll
      for (int j = 0; j < U; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(p + j);
        w[j] = v.x; w[j + 1] = v.y; w[j + 2] = v.z; w[j + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < U; ++j) w[j] = p[j];
    }
  }
};

template <int U>
struct FloatUnit<SchemeF16, U> {
  static constexpr int kUnit = U, kBlockElems = 1, kBlockBytes = 2;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * U;
    if constexpr (U == 8) {
      const uint4 v = *reinterpret_cast<const uint4*>(p);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[2 * j] = __half2float(__ushort_as_half(static_cast<uint16_t>(words[j] & 0xffffu)));
        w[2 * j + 1] = __half2float(__ushort_as_half(static_cast<uint16_t>(words[j] >> 16)));
      }
    } else {
#pragma unroll
      for (int j = 0; j < U; ++j) w[j] = __half2float(__ushort_as_half(p[j]));
    }
  }
};

template <int U>
struct FloatUnit<SchemeBF16, U> {
  static constexpr int kUnit = U, kBlockElems = 1, kBlockBytes = 2;
  static constexpr bool kBf16Activations = true;  // gemv.cuh rounds x to bf16
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + u * U;
    if constexpr (U == 8) {
      const uint4 v = *reinterpret_cast<const uint4*>(p);
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[2 * j] = __uint_as_float(words[j] << 16);
        w[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
      }
    } else {
#pragma unroll
      for (int j = 0; j < U; ++j) w[j] = __uint_as_float(static_cast<uint32_t>(p[j]) << 16);
    }
  }
};

// A block scheme's octets as units of 8 (a thread per 16-byte bf16 store in the prompt
// GEMM's weight pass: consecutive threads write consecutive bytes).
template <class S>
struct Octets {
  static constexpr int kUnit = 8, kBlockElems = S::kBlockElems, kBlockBytes = S::kBlockBytes;
  __device__ static void unit(const uint8_t* row, int64_t o, float* w) { S::octet(row, o, w); }
};

}  // namespace memra::cuda
