// The example_q8x kernels (example_q8x.h states the layout and the arithmetic), built
// against the SDK headers alone into example_q8x.fatbin:
//  - example_q8x_gemv_r4_t<N>: the INT8 GEMV form (memra/quant.h): a block per group of 4
//    weight rows of one of up to 3 matrices (memra_gemv_mats), N tokens per block
//    (blockIdx.y), 4 warps splitting each row's 32-element units; 16-byte loads of codes
//    and activations, dp4a dot products;
//  - example_q8x_dequant: the prompt GEMM's dequantiser (MEMRA_GEMM_BF16): each weight
//    code * scale exactly in float32, rounded to bf16, a thread per 8 elements.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <memra/quant.h>

#include "example_q8x.h"

namespace {

constexpr int kR = EXAMPLE_Q8X_ROWS, kWarps = EXAMPLE_Q8X_WARPS;

__device__ __forceinline__ int dot16(const uint4& a, const uint4& b, int acc) {
  acc = __dp4a(static_cast<int>(a.x), static_cast<int>(b.x), acc);
  acc = __dp4a(static_cast<int>(a.y), static_cast<int>(b.y), acc);
  acc = __dp4a(static_cast<int>(a.z), static_cast<int>(b.z), acc);
  return __dp4a(static_cast<int>(a.w), static_cast<int>(b.w), acc);
}

template <int NT>
__device__ __forceinline__ void gemv(const memra_gemv_mats& ms, int64_t row_bytes, int64_t cols, const int8_t* __restrict__ xq,
                                     const float2* __restrict__ xm, int64_t m) {
  __shared__ float part[kWarps][kR][NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t g = blockIdx.x;
  if (g >= ms.group_end[2]) return;  // past the launch's groups (uniform)
  // Matrix k of the launch owns this group (selects, not indexing: ms stays in registers).
  const int k = g < ms.group_end[0] ? 0 : g < ms.group_end[1] ? 1 : 2;
  const int64_t begin = k == 0 ? 0 : k == 1 ? ms.group_end[0] : ms.group_end[1];
  const int64_t row0 = (g - begin) * kR, rows = k == 0 ? ms.rows[0] : k == 1 ? ms.rows[1] : ms.rows[2];
  const uint8_t* w = reinterpret_cast<const uint8_t*>(k == 0 ? ms.w[0] : k == 1 ? ms.w[1] : ms.w[2]);
  const float* bias = reinterpret_cast<const float*>(k == 0 ? ms.bias[0] : k == 1 ? ms.bias[1] : ms.bias[2]);
  float* y = reinterpret_cast<float*>(k == 0 ? ms.y[0] : k == 1 ? ms.y[1] : ms.y[2]);
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int64_t units = cols / EXAMPLE_Q8X_UNIT;
  float acc[kR][NT];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  for (int64_t u = 32 * warp + lane; u < units; u += 32 * kWarps) {
    uint4 wc[kR][2];
    float dw[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const bool in = row0 + r < rows;
      const uint8_t* rec = w + (in ? row0 + r : 0) * row_bytes;
      const uint4* c = reinterpret_cast<const uint4*>(rec + u * EXAMPLE_Q8X_UNIT);
      wc[r][0] = in ? c[0] : make_uint4(0, 0, 0, 0);
      wc[r][1] = in ? c[1] : make_uint4(0, 0, 0, 0);
      dw[r] = in ? __half2float(reinterpret_cast<const __half*>(rec + cols)[u]) : 0.0f;
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t0 + t >= m) break;
      const uint4* a = reinterpret_cast<const uint4*>(xq + (t0 + t) * cols + u * EXAMPLE_Q8X_UNIT);
      const uint4 a0 = a[0], a1 = a[1];
      const float d = xm[(t0 + t) * units + u].x;
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const int isum = dot16(wc[r][1], a1, dot16(wc[r][0], a0, 0));
        acc[r][t] = fmaf(static_cast<float>(isum), dw[r] * d, acc[r][t]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) part[warp][r][t] = v;
    }
  __syncthreads();
  if (threadIdx.x < kR * NT) {
    const int r = threadIdx.x / NT, t = threadIdx.x % NT;
    if (row0 + r < rows && t0 + t < m) {
      float v = part[0][r][t];
#pragma unroll
      for (int q = 1; q < kWarps; ++q) v = v + part[q][r][t];
      if (bias) v = v + bias[row0 + r];
      y[(t0 + t) * rows + row0 + r] = v;
    }
  }
}

}  // namespace

#define EXAMPLE_Q8X_ENTRY(NT)                                                                                         \
  extern "C" __global__ void __launch_bounds__(32 * kWarps) example_q8x_gemv_r4_t##NT(                                \
      const memra_gemv_mats ms, int64_t row_bytes, int64_t cols, const int8_t* xq, const float2* xm, int64_t m) {    \
    gemv<NT>(ms, row_bytes, cols, xq, xm, m);                                                                         \
  }
EXAMPLE_Q8X_ENTRY(1)
EXAMPLE_Q8X_ENTRY(2)
EXAMPLE_Q8X_ENTRY(4)
EXAMPLE_Q8X_ENTRY(8)
EXAMPLE_Q8X_ENTRY(16)

// (w, row_bytes, rows, cols, ld, hi, lo): a thread per 8 elements of a row.
extern "C" __global__ void __launch_bounds__(256) example_q8x_dequant(const uint8_t* w, int64_t row_bytes, int32_t rows, int64_t cols,
                                                                      int64_t ld, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  const int64_t per_row = cols / 8;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= per_row * rows) return;
  const int64_t r = id / per_row, c0 = (id - r * per_row) * 8;
  const uint8_t* rec = w + r * row_bytes;
  const float d = __half2float(reinterpret_cast<const __half*>(rec + cols)[c0 / EXAMPLE_Q8X_UNIT]);
  const int8_t* q = reinterpret_cast<const int8_t*>(rec) + c0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float v = __fmul_rn(static_cast<float>(q[j]), d);
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    hi[r * ld + c0 + j] = h;
    if (lo) lo[r * ld + c0 + j] = __float2bfloat16_rn(v - __bfloat162float(h));
  }
}
