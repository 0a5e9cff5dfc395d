// CPU reference of the decay_scan op (memra/ops.h): s = decay * s + x[t]; y[t] = s,
// float32 with one rounding per operation (built with -ffp-contract=off), so a CUDA
// kernel using __fmul_rn/__fadd_rn matches it bitwise.
#pragma once

#include <cstdint>

namespace memra::ref {

// One token row of one sequence: updates `state` [width] in place and writes it to y
// (y may be x).
void decay_scan_row(float decay, const float* x, int64_t width, float* state, float* y);

}  // namespace memra::ref
