// Launch choice for the integer-activation GEMVs (gemv_int8.cuh): the CUDA backend's
// matmul (host/backend/cuda/ops_matmul.cpp, matmul_gemv8) and memra-kernel-check.
// Every choice computes the same bits: the kernel variant (q4_k / q4_k2), R and the
// number of persistent blocks change who computes what, never the order of a row's
// sums (memra-kernel-check checks each R, one block per group and 5 persistent blocks,
// both q4_k variants, bitwise against the reference). So the table may depend on M
// freely; it only picks speed.
//
// The figures behind it: docs/PERFORMANCE.md, "int8-activation GEMV" (H200, Qwen3-8B
// shapes): per scheme and token tile, the one configuration with the smallest summed
// time over a layer's 7 matrices; within 3 % of picking the best configuration per matrix.
#pragma once

#include <cstdint>

namespace memra::ref {

struct Int8GemvLaunch {
  const char* kernel;   // entry "memra_gemv8_<kernel>_r<R>_t<NT>" in module "matmul8_<scheme>"
  int rows_per_block;   // R
  int blocks_per_sm;    // persistent blocks per multiprocessor; 0 = one block per R-row group
};

// scheme: "q8_0" | "q4_0" | "q4_k"; m: the launch's token count (the tile is 1, 2, 4, 8 or 16).
// grid = (min(ceil(rows / R), blocks_per_sm * SMs) or ceil(rows / R) when 0, ceil(m / NT)).
// The matrices of one launch (a kernel parameter; device addresses as integers so the
// host and the kernels share the layout). Up to 3 weights over the same activation rows
// (q/k/v, gate/up: host/backend/cuda/ops_matmul.cpp merges them); a single matmul is
// the case of one. Matrix k owns the row groups [group_end[k-1], group_end[k]) (its
// ceil(rows[k] / R) groups of R rows); unused entries repeat the last end. Which launch a
// matrix shares changes who computes its rows, never the order of any row's sums.
struct Int8GemvMats {
  static constexpr int kMax = 3;
  uint64_t w[kMax], y[kMax], bias[kMax];  // weight rows, output [m][rows[k]], bias (0: none)
  int64_t rows[kMax];
  int64_t group_end[kMax];  // group_end[kMax - 1] = all groups of the launch
};

inline Int8GemvLaunch int8_gemv_launch(const char* scheme, int64_t m) {
  const int tile = m <= 1 ? 0 : m <= 2 ? 1 : m <= 4 ? 2 : m <= 8 ? 3 : 4;
  const char s = scheme[1] == '8' ? '8' : scheme[3] == 'k' ? 'k' : '0';  // q8_0, q4_k, q4_0
  if (s == '8') {
    static constexpr Int8GemvLaunch t[5] = {{"q8_0", 2, 8}, {"q8_0", 4, 4}, {"q8_0", 4, 4}, {"q8_0", 4, 8}, {"q8_0", 4, 4}};
    return t[tile];
  }
  if (s == 'k') {
    static constexpr Int8GemvLaunch t[5] = {{"q4_k", 2, 8}, {"q4_k2", 4, 4}, {"q4_k2", 4, 4}, {"q4_k2", 4, 0}, {"q4_k", 4, 0}};
    return t[tile];
  }
  static constexpr Int8GemvLaunch t[5] = {{"q4_0", 4, 4}, {"q4_0", 4, 4}, {"q4_0", 4, 4}, {"q4_0", 4, 0}, {"q4_0", 4, 8}};
  return t[tile];
}

}  // namespace memra::ref
