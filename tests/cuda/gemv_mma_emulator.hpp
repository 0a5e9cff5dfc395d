// A host emulation of the tensor-core bf16 and fp8 decode GEMVs (kernels/matmul/
// gemv_mma_bf16.cuh, gemv_mma_fp8.cuh, included at the end of this header) on the CTA
// emulator (cta_emulator.hpp): their 32 * warps threads run as fibers and the bf16
// mma.m16n8k16 comes from the PTX fragment layout (cta_mma.hpp: exact products added in k
// order, a model of the tensor cores' unspecified order). So the emulated results are held
// to the reference's bound and to each other (batch invariance, the launch's matrices,
// fp8's two activation paths) bit for bit, never to the device. Include it last: it
// defines CUDA's keywords as macros.
#pragma once

#include "tests/cuda/cta_emulator.hpp"

namespace memra::cuda::gemv_mma {

inline void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint32_t a[4] = {a0, a1, a2, a3};
  memra::cuda_emu::mma_m16n8k16(*memra::cuda_emu::g_cta, d, a, b0, b1, false);
}

}  // namespace memra::cuda::gemv_mma

#include "kernels/matmul/gemv_mma_fp8.cuh"  // (and gemv_mma_bf16.cuh; their #pragma unroll: built with -Wno-unknown-pragmas)

namespace memra::cuda::gemv_mma_emu {

// One launch of memra_gemv_bf16_mma_n<NT> (matmul_float.cu) over ms: grid (its groups,
// ceil(m / 8 NT)), 32 * kWarps threads.
template <int NT>
void launch_bf16(const memra::ref::GemvMats& ms, int64_t cols, const float* x, int64_t m) {
  namespace g = memra::cuda::gemv_mma;
  const auto gy = static_cast<unsigned>((m + 8 * NT - 1) / (8 * NT));
  memra::cuda_emu::launch(static_cast<unsigned>(ms.group_end[memra::ref::GemvMats::kMax - 1]), gy, 32 * memra::gemv_mma::kWarps,
                          [&] {
                            const g::Segment s = g::segment(ms, blockIdx.x);
                            g::gemv_tile<NT>(reinterpret_cast<const __nv_bfloat16*>(s.w), s.rows, cols, x, m, s.y, s.bias, s.row0);
                          },
                          [] {});
}

// One launch of memra_gemv_fp8_mma_n<NT> (kX = kXPrepared: x the prepared bf16 plane and
// back its 2^(120 - E); fp8_act_ref.hpp) or of memra_gemv_fp8_scaled_n1 (kXScaled: x f32),
// rows 16-byte aligned, 32 * kFp8Warps threads.
template <int NT, int kX>
void launch_fp8(const memra::ref::GemvMats& ms, int64_t cols, const void* x, const float* back, int64_t m) {
  namespace g = memra::cuda::gemv_mma;
  const auto gy = static_cast<unsigned>((m + 8 * NT - 1) / (8 * NT));
  memra::cuda_emu::launch(static_cast<unsigned>(ms.group_end[memra::ref::GemvMats::kMax - 1]), gy, 32 * memra::gemv_mma::kFp8Warps,
                          [&] {
                            const g::Segment s = g::segment(ms, blockIdx.x);
                            g::gemv_fp8_tile<NT, true, 2, kX>(static_cast<const uint8_t*>(s.w), s.rows, cols, x, back, m, s.y,
                                                              s.bias, s.row0);
                          },
                          [] {});
}

}  // namespace memra::cuda::gemv_mma_emu
