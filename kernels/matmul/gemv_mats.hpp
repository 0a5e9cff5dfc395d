// The matrices of one GEMV launch, shared by the CUDA backend and the GEMV kernels.
// No includes beyond <cstdint>: nvcc and the host compiler both read it.
#pragma once

#include <cstdint>

namespace memra::ref {

// The matrices of one GEMV launch (a kernel parameter; device addresses as integers so
// the host and the kernels share the layout): up to 3 weights over the same activation
// rows (q/k/v, gate/up: host/backend/cuda/ops_matmul.cpp merges them); a single matmul
// is the case of one. Matrix k owns the row groups [group_end[k-1], group_end[k]) (its
// ceil(rows[k] / R) groups of R rows: R of the int8 GEMV's launch, gemv_int8.cuh, or
// the 16-row tiles of the bf16 tensor-core GEMV, gemv_mma_bf16.cuh); unused entries
// repeat the last end. Which launch a matrix shares changes who computes its rows, never
// the order of any row's sums.
struct GemvMats {
  static constexpr int kMax = 3;
  uint64_t w[kMax], y[kMax], bias[kMax];  // weight rows, output [m][rows[k]], bias (0: none)
  int64_t rows[kMax];
  int64_t group_end[kMax];  // group_end[kMax - 1] = all groups of the launch
};

}  // namespace memra::ref
