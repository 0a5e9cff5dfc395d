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

#include "kernels/matmul/gemv_mats.hpp"

namespace memra::ref {

struct Int8GemvLaunch {
  const char* kernel;   // entry "memra_gemv8_<kernel>_r<R>_t<NT>" in module "matmul8_<scheme>"
  int rows_per_block;   // R
  int blocks_per_sm;    // persistent blocks per multiprocessor; 0 = one block per R-row group
};

// Threads per block of an entry's kernel part: the tensor-core Q4_K kernel "q4_km<W>"
// (gemv_int8_mma.cuh, R = 16) runs W warps per slot group, 128 * W threads; the dp4a
// kernels (gemv_int8.cuh) 128.
constexpr int int8_gemv_block_threads(const char* kernel) {
  int n = 0;
  while (kernel[n] != '\0') ++n;
  const bool mma = n == 6 && kernel[0] == 'q' && kernel[1] == '4' && kernel[2] == '_' && kernel[3] == 'k' && kernel[4] == 'm';
  return mma ? 128 * (kernel[5] - '0') : 128;
}

// scheme: "q8_0" | "q4_0" | "q4_k" | "q5_k" | "q6_k" | "iq4_xs"; m: the launch's token
// count (the tile is 1, 2, 4, 8 or 16).
// grid = (min(ceil(rows / R), blocks_per_sm * SMs) or ceil(rows / R) when 0, ceil(m / NT)),
// int8_gemv_block_threads(kernel) threads.
// q5_k, q6_k, iq4_xs (and q4_k's tile 16): measured on an H100 (session 17, the same rule:
// the smallest summed layer time per tile); the other rows on the H200.

constexpr bool int8_scheme_is(const char* a, const char* b) {
  int i = 0;
  while (a[i] != '\0' && a[i] == b[i]) ++i;
  return a[i] == b[i];
}

inline Int8GemvLaunch int8_gemv_launch(const char* scheme, int64_t m) {
  const int tile = m <= 1 ? 0 : m <= 2 ? 1 : m <= 4 ? 2 : m <= 8 ? 3 : 4;
  if (int8_scheme_is(scheme, "q8_0")) {
    static constexpr Int8GemvLaunch t[5] = {{"q8_0", 2, 8}, {"q8_0", 4, 4}, {"q8_0", 4, 4}, {"q8_0", 4, 8}, {"q8_0", 4, 4}};
    return t[tile];
  }
  if (int8_scheme_is(scheme, "q4_k")) {
    // Tile 16: the tensor-core kernel (gemv_int8_mma.cuh), flat in M, passes dp4a there
    // (H100, session 17: a layer 199 against 225 us); below it dp4a is faster.
    static constexpr Int8GemvLaunch t[5] = {{"q4_k", 2, 8}, {"q4_k2", 4, 4}, {"q4_k2", 4, 4}, {"q4_k2", 4, 0}, {"q4_km2", 16, 2}};
    return t[tile];
  }
  if (int8_scheme_is(scheme, "q5_k")) {
    static constexpr Int8GemvLaunch t[5] = {{"q5_k", 2, 4}, {"q5_k", 4, 4}, {"q5_k", 2, 0}, {"q5_k", 4, 0}, {"q5_k2", 2, 8}};
    return t[tile];
  }
  if (int8_scheme_is(scheme, "q6_k")) {
    static constexpr Int8GemvLaunch t[5] = {{"q6_k", 2, 0}, {"q6_k", 4, 4}, {"q6_k", 4, 4}, {"q6_k", 4, 4}, {"q6_k", 4, 8}};
    return t[tile];
  }
  if (int8_scheme_is(scheme, "iq4_xs")) {
    static constexpr Int8GemvLaunch t[5] = {{"iq4_xs", 4, 0}, {"iq4_xs", 4, 8}, {"iq4_xs", 4, 8}, {"iq4_xs", 4, 0}, {"iq4_xs", 4, 0}};
    return t[tile];
  }
  static constexpr Int8GemvLaunch t[5] = {{"q4_0", 4, 4}, {"q4_0", 4, 4}, {"q4_0", 4, 4}, {"q4_0", 4, 0}, {"q4_0", 4, 8}};
  return t[tile];
}

}  // namespace memra::ref
