// quant-nvfp4's device dequantiser (kernels/matmul/dequant_units.cuh states the unit contract):
// nvfp4 layout v1 (nvfp4_layout.hpp), value = (e2m1(code) * float(s)) * g, computed as the CPU
// reference does (nvfp4_ref.cpp; the module is built with --fmad=false), so every value is
// bitwise the oracle's. Blocks are 148 bytes: 4-byte loads.
#pragma once

#include "kernels/matmul/dequant_units.cuh"

namespace memra::cuda {

struct SchemeNVFP4 {
  static constexpr int kUnit = 32, kBlockElems = 256, kBlockBytes = 148;
  // e4m3fn -> float, exactly (scales are finite: the importer and quantiser see to it).
  __device__ static float e4m3(uint32_t b) {
    const uint32_t e = (b >> 3) & 15u, m = b & 7u;
    const float mag = e == 0 ? static_cast<float>(m) * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (b & 0x80u) ? -mag : mag;
  }
  // Signed e2m1 value of a 4-bit code.
  __device__ static float e2m1(uint32_t c) {
    // magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} as twice their value in nibbles: 0,1,2,3,4,6,8,12
    const uint32_t twice = (0xC8643210u >> (4 * (c & 7u))) & 15u;
    const float v = static_cast<float>(twice) * 0.5f;
    return (c & 8u) ? -v : v;
  }
  // Eight elements from a code word (4 bytes, low nibble first) with scale s and g.
  __device__ static void eight(uint32_t word, float s, float g, float* w) {
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = __fmul_rn(__fmul_rn(e2m1((word >> (4 * j)) & 15u), s), g);
  }
  // Unit u: elements [32u, 32u + 32) = sub-blocks 2k and 2k + 1 of block u / 8 (k = u % 8).
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int k = static_cast<int>(u & 7);
    const float g = *reinterpret_cast<const float*>(b);
    const uint32_t sc = *reinterpret_cast<const uint32_t*>(b + 4 + 4 * (k >> 1));
    const float s0 = e4m3((sc >> (16 * (k & 1))) & 0xffu), s1 = e4m3((sc >> (16 * (k & 1) + 8)) & 0xffu);
    const uint32_t* cw = reinterpret_cast<const uint32_t*>(b + 20 + 16 * k);
    eight(cw[0], s0, g, w);
    eight(cw[1], s0, g, w + 8);
    eight(cw[2], s1, g, w + 16);
    eight(cw[3], s1, g, w + 24);
  }
  // Octet o: elements [8o, 8o + 8) = half of sub-block (o % 32) / 2 of block o / 32.
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 5) * kBlockBytes;
    const int e = static_cast<int>(o & 31);
    const float g = *reinterpret_cast<const float*>(b);
    const float s = e4m3(b[4 + (e >> 1)]);
    eight(*reinterpret_cast<const uint32_t*>(b + 20 + 4 * e), s, g, w);
  }
};

}  // namespace memra::cuda
