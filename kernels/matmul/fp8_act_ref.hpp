// The fp8 GEMV's activations (gemv_mma_fp8.cuh), CPU reference; fp8_act.cuh computes
// exactly this on the device (the standalone memra_prepare_act_fp8_rows and the
// producers that write it beside their f32 output: add_rms_norm, gated activations).
//
// Each row of x (f32, cols a multiple of 128) is prepared on its own, per 128-element
// group g (so independent of the batch):
//   amax = max |x_i| over the group  (exact; 0 for an all-zero group)
//   E    = clamp(190 - biased_exponent(amax), -7, 127)   (amax * 2^E in [2^63, 2^64))
//   v_i  = bf16(x_i * 2^E)           (the f32 product, rounded only where it falls below
//                                     2^-126, then to bf16, nearest even)
//   back = 2^(120 - E)               (f32; the GEMV multiplies the group's mma sum by it:
//                                     its codes are values * 2^-120)
// stored as a bf16 plane [m][cols] in the mma's pair order, each quad of elements
// (4k, 4k+1, 4k+2, 4k+3) as (4k, 4k+2, 4k+1, 4k+3): a lane's x_even / x_odd operand
// registers are then consecutive 32-bit words; and back [m][cols/128] f32.
// These are the values the GEMV used to compute from f32 x itself, so results are
// bitwise the same. Inputs must be finite.
#pragma once

#include <cstdint>

namespace memra::ref {

constexpr int kFp8ActGroup = 128;

// The group exponent E of a group whose largest magnitude is amax (above).
int fp8_group_exponent(float amax);

// x [m][cols] -> plane [m][cols] (bf16 bits, pair order above), back [m][cols/128].
// False when cols % 128 != 0.
bool prepare_act_fp8(const float* x, int64_t m, int64_t cols, uint16_t* plane, float* back);

}  // namespace memra::ref
