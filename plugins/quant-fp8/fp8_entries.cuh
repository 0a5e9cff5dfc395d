// quant-fp8's prompt-GEMM dequantiser (no embedding gather: an fp8 embedding table is
// refused on the GPU), in matmul_fp8.fatbin; tests/cuda's GEMM emulator includes it too.
#pragma once
#include "kernels/matmul/fp8_units.cuh"
#include "kernels/matmul/scheme_entries.cuh"

// memra fp8 (fp8_units.cuh): a thread per 32 elements of a row; each value is the CPU
// oracle's e4m3(q) * scale (one rounding), then split into the planes.
extern "C" __global__ void __launch_bounds__(256) memra_gemm_dequant_fp8(const uint8_t* w, int64_t row_bytes, int32_t rows,
                                                                         int64_t k, int64_t ld, __nv_bfloat16* hi,
                                                                         __nv_bfloat16* lo) {
  const int64_t units = k / 32;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= units * rows) return;
  const int64_t r = id / units, u = id - r * units;
  const uint8_t* wr = w + r * row_bytes;
  const float scale = reinterpret_cast<const float*>(wr)[u * 32 / memra::cuda::kFp8Group];
  const uint32_t* c = reinterpret_cast<const uint32_t*>(wr + (k / memra::cuda::kFp8Group) * 4 + u * 32);
  float v[32];
#pragma unroll
  for (int i = 0; i < 8; ++i) memra::cuda::fp8x4_to_float(c[i], v + 4 * i);
#pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = __fmul_rn(v[j], scale);
  const int64_t off = r * ld + u * 32;
  memra::cuda::entries::store_planes<32>(v, hi + off, lo ? lo + off : nullptr);
}

