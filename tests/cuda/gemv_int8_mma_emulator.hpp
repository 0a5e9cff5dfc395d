// A host emulation of the tensor-core Q4_K decode GEMV (plugins/quant-q4_k/gemv_int8_mma.cuh,
// included at the end of this header) on the CTA emulator (cta_emulator.hpp): its 128 * W
// threads run as fibers, and the integer mma.m16n8k32 (u8 x s8 -> s32) is built from the
// PTX ISA's fragment layout. Integer products and sums are exact whatever the order, so
// the emulated mma is the device's bit for bit, and the kernel's f32 arithmetic is the
// host's correctly rounded operations: the emulated kernel must equal ref::gemv_int8 bit
// for bit, as memra-kernel-check holds it on the GPU. Include it last: it defines CUDA's
// keywords as macros.
#pragma once

#include "tests/cuda/cta_emulator.hpp"

namespace memra::cuda::i8mma {

inline uint2 ld_stream8(const void* p) {
  uint2 v;
  std::memcpy(&v, p, 8);
  return v;
}

// mma.m16n8k32.row.col.s32.u8.s8.s32 with every element of C equal to c. Fragments (lane
// l = 4 g + t): a0 = A[g][4t .. 4t+3], a1 = A[g+8][4t ..], a2 = A[g][16+4t ..], a3 =
// A[g+8][16+4t ..] (u8, byte i = element i); b0 = B[4t .. 4t+3][g], b1 = B[16+4t ..][g]
// (s8); d0..d3 = D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1].
inline void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1, int c) {
  struct Frag {
    uint32_t a[4], b[2];
  };
  Frag all[32];
  memra::cuda_emu::g_cta->warp_gather(Frag{{a0, a1, a2, a3}, {b0, b1}}, all);
  const int l = memra::cuda_emu::g_cta->tid() & 31;
  auto A = [&](int row, int k) {  // lane (row % 8) * 4 + (k % 16) / 4, register (row / 8) + 2 (k / 16), byte k % 4
    const uint32_t w = all[(row % 8) * 4 + (k % 16) / 4].a[(row / 8) + 2 * (k / 16)];
    return static_cast<int>((w >> (8 * (k % 4))) & 0xffu);
  };
  auto B = [&](int k, int col) {  // lane col * 4 + (k % 16) / 4, register k / 16, byte k % 4 (signed)
    const uint32_t w = all[col * 4 + (k % 16) / 4].b[k / 16];
    return static_cast<int>(static_cast<int8_t>((w >> (8 * (k % 4))) & 0xffu));
  };
  for (int i = 0; i < 4; ++i) {
    const int row = l / 4 + 8 * (i / 2), col = 2 * (l % 4) + (i % 2);
    int acc = c;
    for (int k = 0; k < 32; ++k) acc += A(row, k) * B(k, col);
    d[i] = acc;
  }
}

}  // namespace memra::cuda::i8mma

#include "plugins/quant-q4_k/gemv_int8_mma.cuh"  // (its #pragma unroll: the test builds with -Wno-unknown-pragmas)

namespace memra::cuda::i8mma_emu {

// One launch of gemv_q4_k_mma<NT, W> over grid (gx, ceil(m / NT)), as the CUDA backend
// launches memra_gemv8_q4_km<W>_r16_t<NT>.
template <int NT, int W>
void launch(unsigned gx, const memra::ref::GemvMats& ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm,
            int64_t m) {
  const auto gy = static_cast<unsigned>((m + NT - 1) / NT);
  memra::cuda_emu::launch(gx, gy, 128 * W, [&] { memra::cuda::i8mma::gemv_q4_k_mma<NT, W>(ms, row_bytes, cols, xq, xm, m); }, [] {});
}

}  // namespace memra::cuda::i8mma_emu
