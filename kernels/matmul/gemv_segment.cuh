// Which matrix of a GemvMats launch (gemv_mats.hpp) a row group belongs to, for every
// GEMV kernel that takes one (int8 dp4a, int8 and bf16/fp8 tensor-core).
#pragma once

#include <stdint.h>

#include "kernels/matmul/gemv_mats.hpp"

namespace memra::cuda {

// Group g of a launch (groups of R rows): its matrix's weight, output, bias, row count
// and first row.
struct GemvSegment {
  const uint8_t* w;
  float* y;
  const float* bias;
  int64_t rows, row0;
};
template <int R>
__device__ __forceinline__ GemvSegment gemv_segment(const memra::ref::GemvMats& ms, int64_t g) {
  const int k = (g >= ms.group_end[0]) + (g >= ms.group_end[1]);  // selects, no indexed parameter loads
  const int64_t first = k == 0 ? 0 : (k == 1 ? ms.group_end[0] : ms.group_end[1]);
  GemvSegment s;
  s.w = reinterpret_cast<const uint8_t*>(k == 0 ? ms.w[0] : (k == 1 ? ms.w[1] : ms.w[2]));
  s.y = reinterpret_cast<float*>(k == 0 ? ms.y[0] : (k == 1 ? ms.y[1] : ms.y[2]));
  s.bias = reinterpret_cast<const float*>(k == 0 ? ms.bias[0] : (k == 1 ? ms.bias[1] : ms.bias[2]));
  s.rows = k == 0 ? ms.rows[0] : (k == 1 ? ms.rows[1] : ms.rows[2]);
  s.row0 = (g - first) * R;
  return s;
}

}  // namespace memra::cuda
