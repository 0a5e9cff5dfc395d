// quant-nvfp4's CPU side: the exact dequantiser (the oracle for its kernels), the quantiser
// memra-repack -q nvfp4 uses, and the importer of ModelOpt's NVFP4 safetensors form.
#pragma once

#include <cstdint>
#include <string>

#include "memra/memra.h"
#include "nvfp4_layout.hpp"

namespace memra::nvfp4 {

// Bytes of a row of `cols` (a multiple of 256); 0 otherwise.
uint64_t row_bytes(int64_t cols);

// One row of `cols` elements, exactly (nvfp4_layout.hpp).
void dequantize_row(const uint8_t* row, int64_t cols, float* dst);

// Quantises rows: per row g = amax / (6 * 448) (1 for an all-zero row), per 16 elements the
// e4m3 scale of their amax / 6 / g (round to nearest even), codes the nearest e2m1 value
// of x / (float(s) * g), ties to the even index. Inputs must be finite.
void quantize_rows(const float* src, int64_t rows, int64_t cols, uint8_t* dst);

// The nearest e2m1 code of v (sign bit 3), ties to the even magnitude index.
uint8_t e2m1_code(float v);

}  // namespace memra::nvfp4
