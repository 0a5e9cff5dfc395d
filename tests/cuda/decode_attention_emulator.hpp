// A host emulation of the decode attention kernels (kernels/attention/paged_attention.cu,
// included at the end of this header) on the CTA emulator (cta_emulator.hpp: fibers,
// barriers, warp shuffles, cp.async), one CTA of 128 threads at a time. A cp.async copy
// lands only when its thread waits for its group, and shared memory starts as NaN, so a
// read of staged data before the wait and the barrier, or of anything never staged, shows
// up as NaN in the output. What it cannot show: the device's expf/tanhf and timing.
// Include it last: it defines CUDA's keywords as macros.
#pragma once

#include "tests/cuda/cta_emulator.hpp"

// The tensor-core primitives (mma.m16n8k16 with 16-bit operands, ldmatrix .x4) come from
// tests/cuda/cta_mma.hpp's PTX fragment layouts: the tensor cores' own accumulation order
// is not specified, so only bounds and bit equalities between the emulator's own runs are
// checked here.
inline uint32_t to16(float x, __nv_bfloat16) { return memra::quant::f32_to_bf16(x); }
inline float from16(uint32_t h, __nv_bfloat16) { return __uint_as_float(h << 16); }
inline uint32_t to16(float x, __half) { return memra::quant::f32_to_fp16(x); }
// Two e4m3 codes (low 16 bits) as two f16 (exact: e4m3's values are f16 values).
inline uint32_t fp8x2_to_f16x2(uint32_t two) {
  const auto h = [](uint32_t c) {
    return static_cast<uint32_t>(memra::quant::f32_to_fp16(memra::quant::f8_e4m3_to_f32(static_cast<uint8_t>(c & 0xffu))));
  };
  return h(two) | (h(two >> 8) << 16);
}
inline float from16(uint32_t h, __half) { return memra::quant::fp16_to_f32(static_cast<uint16_t>(h)); }
inline void ldsm_x4(uint32_t (&r)[4], const void* p) { memra::cuda_emu::ldmatrix_x4(*memra::cuda_emu::g_cta, r, p, false); }
inline void ldsm_x4_trans(uint32_t (&r)[4], const void* p) { memra::cuda_emu::ldmatrix_x4(*memra::cuda_emu::g_cta, r, p, true); }
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __nv_bfloat16) {
  memra::cuda_emu::mma_m16n8k16(*memra::cuda_emu::g_cta, d, a, b0, b1, false);
}
inline void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, __half) {
  memra::cuda_emu::mma_m16n8k16(*memra::cuda_emu::g_cta, d, a, b0, b1, true);
}

#include "kernels/attention/paged_attention.cu"  // (its #pragma unroll: the test builds with -Wno-unknown-pragmas)

namespace memra::decode_emu {

// Launches a grid (gx, gy) of one of the kernels: body() runs once per thread with
// blockIdx set; shared memory is NaN at the start of every CTA.
template <class Body>
void launch(unsigned gx, unsigned gy, Body body) {
  cuda_emu::launch(gx, gy, 128, body, [] { std::memset(smem_raw, 0xff, sizeof smem_raw); });
}

}  // namespace memra::decode_emu
