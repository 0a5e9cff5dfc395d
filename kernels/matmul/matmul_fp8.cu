// Matmul module for memra fp8 weights (fp8_units.cuh): the decode GEMV.
//
// R rows (1 or 2) per warp and a tile of up to NT tokens, as gemv.cuh otherwise. Lane l takes V
// consecutive codes at a time (V = 16: one 16-byte load, when the codes of every row
// start 16-byte aligned: cols % 512 == 0 and an aligned base; else V = 4), U such
// runs in flight, walking the row in order: elements [(i*32 + l)*V, +V) for i = 0, 1,
// ... A run lies inside one 128-element group, so it contributes
// scale * sum_j q_j*x_j (fmaf chain over j, then one fmaf by the scale): not the CPU
// oracle's per-weight rounding (q*scale, then the product), so within the matmul
// bound, not bitwise. The order is fixed by the row length and V only (which depend on
// the weight alone), never by NT or M: a token's output is bitwise the same for any
// batch; the 32 lane sums meet in the fixed xor butterfly.
#include "kernels/common/reduce.cuh"
#include "kernels/matmul/fp8_units.cuh"
#include "kernels/matmul/gemv.cuh"  // kGemvWarps

namespace {
using namespace memra::cuda;

template <int V>
struct Codes;
template <>
struct Codes<16> {
  using T = uint4;
  __device__ static void unpack(const uint4& v, float* q) {
    fp8x4_to_float(v.x, q);
    fp8x4_to_float(v.y, q + 4);
    fp8x4_to_float(v.z, q + 8);
    fp8x4_to_float(v.w, q + 12);
  }
};
template <>
struct Codes<4> {
  using T = uint32_t;
  __device__ static void unpack(const uint32_t& v, float* q) { fp8x4_to_float(v, q); }
};

// R rows per warp (the host launches rows / (kGemvWarps * R) blocks): each x value a
// lane loads serves R rows, so the x traffic per weight byte (4 bytes of f32 x per fp8
// code) drops R-fold. A row's arithmetic does not depend on R.
template <int NT, int V, int R>
__device__ __forceinline__ void gemv_fp8(const uint8_t* __restrict__ w, int64_t row_bytes, int64_t rows, int64_t cols,
                                         const float* __restrict__ x, int64_t m, float* __restrict__ y,
                                         const float* __restrict__ bias) {
  constexpr int U = V == 16 ? (NT * R <= 2 ? 4 : 2) : 8;  // runs in flight per lane and row
  using C = Codes<V>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kGemvWarps + warp) * R;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (row0 >= rows || t0 >= m) return;
  const int nt = static_cast<int>(m - t0 < NT ? m - t0 : NT);
  const int nr = static_cast<int>(rows - row0 < R ? rows - row0 : R);
  const float* scales[R];
  const typename C::T* codes[R];
#pragma unroll
  for (int k = 0; k < R; ++k) {
    const uint8_t* wr = w + (row0 + (k < nr ? k : 0)) * row_bytes;
    scales[k] = reinterpret_cast<const float*>(wr);
    codes[k] = reinterpret_cast<const typename C::T*>(wr + (cols / kFp8Group) * 4);
  }
  const int64_t runs = cols / V;
  float acc[R][NT];
#pragma unroll
  for (int k = 0; k < R; ++k)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[k][t] = 0.0f;
  for (int64_t r0 = lane; r0 < runs; r0 += 32 * U) {
    typename C::T v[R][U];
#pragma unroll
    for (int k = 0; k < R; ++k)
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (r0 + 32 * u < runs) v[k][u] = __ldg(codes[k] + r0 + 32 * u);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t run = r0 + 32 * u;
      if (run >= runs) break;
      const int64_t e = run * V;
      float q[R][V], s[R];
#pragma unroll
      for (int k = 0; k < R; ++k) {
        C::unpack(v[k][u], q[k]);
        s[k] = __ldg(scales[k] + e / kFp8Group);
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t < nt) {
          const float4* xp = reinterpret_cast<const float4*>(x + (t0 + t) * cols + e);
          float p[R];
#pragma unroll
          for (int k = 0; k < R; ++k) p[k] = 0.0f;
#pragma unroll
          for (int j = 0; j < V / 4; ++j) {
            const float4 xv = xp[j];
#pragma unroll
            for (int k = 0; k < R; ++k) {
              p[k] = fmaf(q[k][4 * j], xv.x, p[k]);
              p[k] = fmaf(q[k][4 * j + 1], xv.y, p[k]);
              p[k] = fmaf(q[k][4 * j + 2], xv.z, p[k]);
              p[k] = fmaf(q[k][4 * j + 3], xv.w, p[k]);
            }
          }
#pragma unroll
          for (int k = 0; k < R; ++k) acc[k][t] = fmaf(s[k], p[k], acc[k][t]);
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < R; ++k) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt && k < nr) {
        float sum = warp_sum(acc[k][t]);
        if (lane == 0) {
          if (bias) sum = sum + bias[row0 + k];
          y[(t0 + t) * rows + row0 + k] = sum;
        }
      }
    }
  }
}

}  // namespace

// cols % 128 == 0 (the layout's group). The run width depends on the weight only;
// rows per warp: 2 up to 4 tokens, else 1.
#define MEMRA_DEFINE_GEMV_FP8_NT(NT, R)                                                                           \
  extern "C" __global__ void __launch_bounds__(32 * memra::cuda::kGemvWarps)                                     \
      memra_gemv_fp8_t##NT(const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t cols, const float* x,       \
                           int64_t m, float* y, const float* bias) {                                             \
    if (row_bytes % 16 == 0 && (cols / memra::cuda::kFp8Group) % 4 == 0 && (reinterpret_cast<uintptr_t>(w) & 15) == 0) \
      gemv_fp8<NT, 16, R>(w, row_bytes, rows, cols, x, m, y, bias);                                              \
    else                                                                                                         \
      gemv_fp8<NT, 4, R>(w, row_bytes, rows, cols, x, m, y, bias);                                               \
  }

// Two rows per warp up to 4 tokens (host/backend/cuda/ops_matmul.cpp kSchemes small_tile_rows: the launch matches).
MEMRA_DEFINE_GEMV_FP8_NT(1, 2)
MEMRA_DEFINE_GEMV_FP8_NT(2, 2)
MEMRA_DEFINE_GEMV_FP8_NT(4, 2)
MEMRA_DEFINE_GEMV_FP8_NT(8, 1)
MEMRA_DEFINE_GEMV_FP8_NT(16, 1)
