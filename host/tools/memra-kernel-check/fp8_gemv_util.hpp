// Shared by check_fp8_gemv.cpp and bench_int8_gemv.cpp: launches of the fp8 GEMV's
// activation preparation and of its GEMV kernels (kernels/matmul/matmul_fp8.cu) through
// the backend's kernel services.
#pragma once

#include "host/tools/memra-kernel-check/int8_gemv_util.hpp"
#include "kernels/matmul/gemv_mats.hpp"

namespace memra::kcheck::fp8 {

// x [*][cols] device f32 (row i from rows[i], or i when rows is null) -> plane [m][cols]
// bf16 and back [m][cols/128] f32 (kernels/matmul/fp8_act_ref.hpp).
inline void launch_prepare(i8::Kernels& k, const void* x, int64_t cols, const void* rows, int64_t m, void* plane, void* back,
                           void* stream = nullptr) {
  memra_kernel* kern = k.get("matmul8_act", "memra_prepare_act_fp8_rows");  // the backend's bf16s128 producer
  void* args[] = {&x, &cols, &rows, &m, &plane, &back};
  k.launch(kern, static_cast<unsigned>((m * (cols / 128) + 7) / 8), 1, 256, args, stream);
}

// One matrix w [rows][cols] through a GEMV of matmul_fp8 (memra_gemv_fp8_mma_n<nt>'s
// parameters: the prepared plane and back-scales; memra_gemv_fp8_scaled_n1 reads x as
// f32 instead), nt n-tiles of 8 tokens per block, `warps` warps per block.
inline void launch_gemv(i8::Kernels& k, memra_kernel* kern, int nt, int warps, const void* w, int64_t rows, int64_t cols,
                        const void* x, const void* back, int64_t m, void* y, const void* bias, void* stream = nullptr) {
  ref::GemvMats ms{};
  ms.w[0] = reinterpret_cast<uint64_t>(w);
  ms.y[0] = reinterpret_cast<uint64_t>(y);
  ms.bias[0] = reinterpret_cast<uint64_t>(bias);
  ms.rows[0] = rows;
  const int64_t tiles = (rows + 15) / 16;
  for (int64_t& e : ms.group_end) e = tiles;
  void* args[] = {&ms, &cols, &x, &back, &m};
  k.launch(kern, static_cast<unsigned>(tiles), static_cast<unsigned>((m + 8 * nt - 1) / (8 * nt)), static_cast<unsigned>(32 * warps), args,
           stream);
}

}  // namespace memra::kcheck::fp8
