// The device dequantisers of the built-in block schemes (kernels/matmul/dequant_units.cuh
// states the unit contract): Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and IQ4_XS, one unit or octet at
// a time. They follow repack/quant/dequant_*.cpp operation for operation, and the modules
// are built with --fmad=false, so each value is bitwise the CPU oracle's (gguf-py's) value:
// e.g. Q4_K is (d*sc)*q - (dmin*m), rounded per step. Blocks are read bytewise (block
// sizes like 34 or 210 bytes break wider alignment). Used by the plugins' GEMV, GEMM
// dequantiser and embedding entries; without nvcc the tests' emulators include it.
#pragma once

#include "kernels/matmul/dequant_units.cuh"

namespace memra::cuda {

// Q8_0 (34 bytes / 32): f16 d, 32 int8. y = q * d. Blocks are 2-byte aligned.
struct SchemeQ8_0 {
  static constexpr int kUnit = 32, kBlockElems = 32, kBlockBytes = 34;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    uint8_t b[34];
    load_bytes<34, 2>(row + u * kBlockBytes, b);
    const float d = f16_bytes(b[0], b[1]);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  }
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 2) * kBlockBytes;
    uint8_t q[8];
    load_bytes<8, 2>(b + 2 + 8 * (o & 3), q);
    const float d = f16_bytes(b[0], b[1]);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = static_cast<float>(static_cast<int8_t>(q[j])) * d;
  }
};

// Q4_0 (18 bytes / 32): f16 d, nibbles (j: low of byte j, j+16: high). y = d*(q-8).
struct SchemeQ4_0 {
  static constexpr int kUnit = 32, kBlockElems = 32, kBlockBytes = 18;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    uint8_t b[18];
    load_bytes<18, 2>(row + u * kBlockBytes, b);
    const float d = f16_bytes(b[0], b[1]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[2 + j];
      w[j] = d * static_cast<float>((q & 0x0f) - 8);
      w[j + 16] = d * static_cast<float>((q >> 4) - 8);
    }
  }
  // Octet p of a block: the low nibbles (p < 2) or high nibbles of bytes 8 (p & 1) + j.
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 2) * kBlockBytes;
    const int p = static_cast<int>(o & 3);
    uint8_t q[8];
    load_bytes<8, 2>(b + 2 + 8 * (p & 1), q);
    const float d = f16_bytes(b[0], b[1]);
    const int shift = 4 * (p >> 1);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = d * static_cast<float>(((q[j] >> shift) & 0x0f) - 8);
  }
};

// 6-bit scale and min of sub-block g of a Q4_K/Q5_K super-block; the 12-byte field
// as three little-endian words (bytes 0-3, 4-7, 8-11), so a run-time g indexes
// registers, not local memory. Sub-blocks 0..3: low 6 bits of bytes g (scale) and
// g+4 (min); 4..7: low/high nibble of byte g+4 plus the top 2 bits of bytes g-4 / g.
__device__ __forceinline__ void scale_min_k4(uint32_t s0, uint32_t s1, uint32_t s2, int g, int& sc, int& mn) {
  auto byte = [](uint32_t w, int i) { return static_cast<int>((w >> (8 * i)) & 0xffu); };
  if (g < 4) {
    sc = byte(s0, g) & 63;
    mn = byte(s1, g) & 63;
  } else {
    const int j = g - 4;
    sc = (byte(s2, j) & 0x0f) | ((byte(s0, j) >> 6) << 4);
    mn = (byte(s2, j) >> 4) | ((byte(s1, j) >> 6) << 4);
  }
}

// Sub-block g's scale d * sc and offset dmin * m from a Q4_K / Q5_K super-block's 16-byte
// header h (f16 d, f16 dmin, the 12 bytes of 6-bit scales and mins).
__device__ __forceinline__ void kquant_scale_min(const uint4& h, int g, float& dg, float& mg) {
  const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
  const float dmin = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x >> 16)));
  int sc, mn;
  scale_min_k4(h.y, h.z, h.w, g, sc, mn);
  dg = d * static_cast<float>(sc);
  mg = dmin * static_cast<float>(mn);
}

// Q4_K (144 bytes / 256, 16-byte aligned blocks): unit = one 32-element sub-block g.
// y = (d*sc)*q - (dmin*m). Loads: the 16-byte header and the sub-block pair's 32 code bytes.
struct SchemeQ4_K {
  static constexpr int kUnit = 32, kBlockElems = 256, kBlockBytes = 144;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int g = static_cast<int>(u & 7);
    const uint4 h = *reinterpret_cast<const uint4*>(b);
    uint8_t qs[32];
    load_bytes<32, 16>(b + 16 + 32 * (g >> 1), qs);
    float dg, mg;
    kquant_scale_min(h, g, dg, mg);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) w[l] = dg * static_cast<float>((qs[l] >> shift) & 0x0f) - mg;
  }
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 5) * kBlockBytes;
    const int g = static_cast<int>((o >> 2) & 7), l0 = 8 * static_cast<int>(o & 3);
    const uint4 h = *reinterpret_cast<const uint4*>(b);
    uint8_t qs[8];
    load_bytes<8, 8>(b + 16 + 32 * (g >> 1) + l0, qs);
    float dg, mg;
    kquant_scale_min(h, g, dg, mg);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int l = 0; l < 8; ++l) w[l] = dg * static_cast<float>((qs[l] >> shift) & 0x0f) - mg;
  }
};

// Q5_K (176 bytes / 256, 16-byte aligned): Q4_K plus a fifth bit (bit g of qh[l]).
struct SchemeQ5_K {
  static constexpr int kUnit = 32, kBlockElems = 256, kBlockBytes = 176;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int g = static_cast<int>(u & 7);
    const uint4 h = *reinterpret_cast<const uint4*>(b);
    uint8_t qh[32], qs[32];
    load_bytes<32, 16>(b + 16, qh);
    load_bytes<32, 16>(b + 48 + 32 * (g >> 1), qs);
    float dg, mg;
    kquant_scale_min(h, g, dg, mg);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = ((qs[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4);
      w[l] = dg * static_cast<float>(q) - mg;
    }
  }
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 5) * kBlockBytes;
    const int g = static_cast<int>((o >> 2) & 7), l0 = 8 * static_cast<int>(o & 3);
    const uint4 h = *reinterpret_cast<const uint4*>(b);
    uint8_t qh[8], qs[8];
    load_bytes<8, 8>(b + 16 + l0, qh);
    load_bytes<8, 8>(b + 48 + 32 * (g >> 1) + l0, qs);
    float dg, mg;
    kquant_scale_min(h, g, dg, mg);
    const int shift = 4 * (g & 1);
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int q = ((qs[l] >> shift) & 0x0f) | (((qh[l] >> g) & 1) << 4);
      w[l] = dg * static_cast<float>(q) - mg;
    }
  }
};

// Q6_K (210 bytes / 256, 2-byte aligned): ql[128], qh[64], int8 scales[16], f16 d.
// Unit = 32 elements e = 32*gi + l of the super-block. y = (d*sc)*(q-32).
struct SchemeQ6_K {
  static constexpr int kUnit = 32, kBlockElems = 256, kBlockBytes = 210;
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int gi = static_cast<int>(u & 7);
    const int h = gi >> 2;
    // Element r = 32*(gi&3) + l takes ql[64h + 32*(gi&1) + l] (nibble (gi&3)>>1) and
    // qh[32h + l] (bits 2*(gi&3)).
    uint8_t ql[32], qh[32], tail[4];
    load_bytes<32, 2>(b + 64 * h + 32 * (gi & 1), ql);
    load_bytes<32, 2>(b + 128 + 32 * h, qh);
    load_bytes<4, 2>(b + 192 + ((2 * gi) & ~1), tail);  // the unit's two scales
    const uint16_t dbits = *reinterpret_cast<const uint16_t*>(b + 208);
    const float d = __half2float(__ushort_as_half(dbits));
    const float dl0 = d * static_cast<float>(static_cast<int8_t>(tail[0]));
    const float dl1 = d * static_cast<float>(static_cast<int8_t>(tail[1]));
    const int lshift = 4 * ((gi & 3) >> 1), hshift = 2 * (gi & 3);
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int low = (ql[l] >> lshift) & 0x0f;
      const int high = (qh[l] >> hshift) & 3;
      const int q = (low | (high << 4)) - 32;
      w[l] = (l < 16 ? dl0 : dl1) * static_cast<float>(q);
    }
  }
  // Octet: elements l0..l0+7 of unit gi (one scale: index 2 gi, or 2 gi + 1 past l = 16).
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 5) * kBlockBytes;
    const int gi = static_cast<int>((o >> 2) & 7), l0 = 8 * static_cast<int>(o & 3);
    const int h = gi >> 2;
    uint8_t ql[8], qh[8];
    load_bytes<8, 2>(b + 64 * h + 32 * (gi & 1) + l0, ql);
    load_bytes<8, 2>(b + 128 + 32 * h + l0, qh);
    const uint16_t dbits = *reinterpret_cast<const uint16_t*>(b + 208);
    const float d = __half2float(__ushort_as_half(dbits));
    const float dl = d * static_cast<float>(static_cast<int8_t>(b[192 + 2 * gi + (l0 >= 16 ? 1 : 0)]));
    const int lshift = 4 * ((gi & 3) >> 1), hshift = 2 * (gi & 3);
#pragma unroll
    for (int l = 0; l < 8; ++l) {
      const int low = (ql[l] >> lshift) & 0x0f;
      const int high = (qh[l] >> hshift) & 3;
      const int q = (low | (high << 4)) - 32;
      w[l] = dl * static_cast<float>(q);
    }
  }
};

// IQ4_XS (136 bytes / 256, 8-byte aligned): f16 d, u16 scales_h, scales_l[4],
// qs[128]; codes into the IQ4_NL codebook. Unit = sub-block g. y = (d*ls) * kvalues[q].
struct SchemeIQ4_XS {
  static constexpr int kUnit = 32, kBlockElems = 256, kBlockBytes = 136;
  // The codebook {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
  // 113} packed into two words (byte i = value i), so it stays in registers.
  __device__ static int codebook(int i) {
    const uint64_t table = i < 8 ? 0xF6EADDCFBFAD9881ull : 0x7159453526190D01ull;
    return static_cast<int8_t>(static_cast<uint8_t>(table >> (8 * (i & 7))));
  }
  __device__ static void unit(const uint8_t* row, int64_t u, float* w) {
    const uint8_t* b = row + (u >> 3) * kBlockBytes;
    const int g = static_cast<int>(u & 7);
    const uint2 h = *reinterpret_cast<const uint2*>(b);  // d, scales_h | scales_l[0..3]
    uint8_t q[16];
    load_bytes<16, 8>(b + 8 + 16 * g, q);
    const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
    const int lo = static_cast<int>((h.y >> (4 * g)) & 0x0fu);  // nibble g&1 of scales_l[g/2]
    const int hi = static_cast<int>((h.x >> (16 + 2 * g)) & 3u);
    const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      w[j] = dl * static_cast<float>(codebook(q[j] & 0x0f));
      w[j + 16] = dl * static_cast<float>(codebook(q[j] >> 4));
    }
  }
  // Octet p of sub-block g: low nibbles (p < 2) or high of bytes 8 (p & 1) + j.
  __device__ static void octet(const uint8_t* row, int64_t o, float* w) {
    const uint8_t* b = row + (o >> 5) * kBlockBytes;
    const int g = static_cast<int>((o >> 2) & 7), p = static_cast<int>(o & 3);
    const uint2 h = *reinterpret_cast<const uint2*>(b);
    uint8_t q[8];
    load_bytes<8, 8>(b + 8 + 16 * g + 8 * (p & 1), q);
    const float d = __half2float(__ushort_as_half(static_cast<uint16_t>(h.x & 0xffffu)));
    const int lo = static_cast<int>((h.y >> (4 * g)) & 0x0fu);
    const int hi = static_cast<int>((h.x >> (16 + 2 * g)) & 3u);
    const float dl = d * static_cast<float>((lo | (hi << 4)) - 32);
    const int shift = 4 * (p >> 1);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = dl * static_cast<float>(codebook((q[j] >> shift) & 0x0f));
  }
};

}  // namespace memra::cuda
