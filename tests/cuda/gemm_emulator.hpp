// A host emulation of the prefill GEMM module (kernels/matmul/gemm_mma.cu, included at the
// end: the tensor-core product gemm_mma.cuh, the activation split and the weight dequant
// passes) on the CTA emulator (cta_emulator.hpp): cp.async, ldmatrix and the bf16 mma over
// the emulator's shared memory (cta_mma.hpp: exact products added in k order, a model of
// the tensor cores, so products are held to bounds; the split and dequant passes, plain
// f32 arithmetic, to the references bit for bit). Include it last: it defines CUDA's
// keywords as macros.
#pragma once

#include "tests/cuda/cta_emulator.hpp"

// The GEMM's primitives; shared addresses are offsets into the emulator's smem_raw.
namespace memra::cuda::gemm {
inline void cp_async16(uint32_t dst, const void* src, int src_bytes) { ::cp_async16(smem_raw + dst, src, src_bytes); }
inline void cp_async_commit() { ::cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  ::cp_async_wait<N>();
}
inline void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  uint32_t r[4];
  memra::cuda_emu::ldmatrix_x4(*memra::cuda_emu::g_cta, r, smem_raw + addr, false);
  r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  memra::cuda_emu::mma_m16n8k16(*memra::cuda_emu::g_cta, d, a, b0, b1, false);
}
}  // namespace memra::cuda::gemm

#include "kernels/matmul/gemm_mma.cu"  // (its #pragma unroll: built with -Wno-unknown-pragmas)
// The schemes' weight-plane dequantisers (each quant plugin's module has its own).
#include "plugins/quant-float/float_entries.cuh"
#include "plugins/quant-fp8/fp8_entries.cuh"
#include "plugins/quant-iq4_xs/iq4_xs_entries.cuh"
#include "plugins/quant-q4_0/q4_0_entries.cuh"
#include "plugins/quant-q4_k/q4_k_entries.cuh"
#include "plugins/quant-q5_k/q5_k_entries.cuh"
#include "plugins/quant-q6_k/q6_k_entries.cuh"
#include "plugins/quant-q8_0/q8_0_entries.cuh"
