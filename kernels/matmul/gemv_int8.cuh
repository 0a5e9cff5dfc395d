// Integer-activation decode GEMV frame (numeric contract v2): y[t][r] = sum over units of
// the weight block's codes . the activation block's int8 codes (dp4a, exact) times the
// two blocks' scales, f32 accumulation. The arithmetic and the order of every f32 sum
// are the scheme's CPU reference's (plugins/quant-common/gemv_int8_ref.hpp); this frame
// only decides who computes what.
//
// Launch: 128 threads (4 warps) per block; a "group" is R consecutive weight rows and
// NT tokens (grid.y = ceil(m/NT), NT = 1, 2, 4, 8, 16). Blocks are persistent: block b
// takes groups b, b + grid.x, ... (grid.x <= ceil(rows/R), any value). Unit u of a row
// (32 weights) belongs to thread u % 128, which walks its units in ascending order; a
// row's 128 partials are summed per warp by the xor-butterfly tree, then over the
// warps in order. None of this depends on R, NT, grid.x or M: a token's result is the
// same bits for any launch. A launch covers up to 3 matrices over the same activation
// rows (GemvMats: the groups of matrix k follow those of k-1), so sharing a launch
// changes nothing either. PDL (kernels/common/pdl.cuh): a block issues its first step's
// weight loads, then waits for the previous kernel before reading activations or writing
// y. The caller guarantees cols % 256 == 0 (rows of whole
// 16-byte-aligned runs), w and xq 16-byte aligned, xm 8-byte aligned; nothing is checked here.
//
// Weights stream once per block for all its tokens, 16-byte loads that skip L1
// (ld.global.nc.L1::no_allocate). Work is a sequence of steps (group, phase), a phase
// being 128 units (4096 columns) of each of the group's rows; the next step's weights
// are loaded before the current step is computed and reduced, so loads stay in flight
// across row groups. Activation codes (cols bytes per token) and scales are read
// through L1, once per token for all R rows.
// The schemes' kernels on this frame live in their quant plugins (plugins/quant-*/, e.g.
// plugins/quant-common/gemv_int8_blocks.cuh): each decodes its weight blocks into
// dp4a-ready words and the blocks' scales.
// Without nvcc (tests/cuda/gemv_int8_emulator.hpp includes this file on the host) the CUDA
// types, the streaming load and the integer intrinsics come from the emulator.
#pragma once

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
#include <stdint.h>

#include "kernels/common/pdl.cuh"
#include "kernels/matmul/gemv_mats.hpp"
#include "kernels/matmul/gemv_segment.cuh"

namespace memra::cuda::i8 {

constexpr int kThreads = 128;
constexpr int kWarps = 4;
constexpr int kPhaseUnits = 128;  // units per row per phase = one per thread

#if defined(__CUDACC__)
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
#endif

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

// The warp sums of N = R*NT partials at once (reduce-scatter): at each xor distance a
// lane keeps half of its values and adds its partner's copy of them, until one value
// per lane (or per lane pair...) remains. Every value is still summed by the butterfly
// tree (lanes l, l^16 first, then ^8, ^4, ^2, ^1; f32 addition is commutative, so who
// adds a pair does not change its bits), with 31 shuffles instead of 5 per value.
// Writes value j (= r*NT + t) of this warp to red[j].
template <int N>
__device__ __forceinline__ void warp_sums(float (&v)[N], float* red) {
  const int lane = threadIdx.x & 31;
  int base = 0;
  constexpr int kLevels[5] = {16, 8, 4, 2, 1};
#pragma unroll
  for (int k = 0, n = N; k < 5; ++k) {
    const int off = kLevels[k];
    if (n > 1) {
      const int half = n / 2;
      const bool upper = (lane & off) != 0;
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        if (i < half) {
          const float send = upper ? v[i] : v[i + half];
          const float keep = upper ? v[i + half] : v[i];
          v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
      }
      if (upper) base += half;
      n = half;
    } else {
      v[0] = v[0] + __shfl_xor_sync(0xffffffffu, v[0], off);
    }
  }
  constexpr int kLeft = N > 32 ? N / 32 : 1;                 // values per lane at the end
  constexpr int kDup = N >= 32 ? 1 : 32 / N;                 // lanes holding each value
  if ((lane & (kDup - 1)) == 0)
#pragma unroll
    for (int i = 0; i < kLeft; ++i) red[base + i] = v[i];
}

// Per-(row, token) partials of one group -> y: warp sums, warps summed in order, + bias.
// red is double-buffered by group parity: the barrier of one group's finish orders the
// previous use of the other buffer.
template <int R, int NT>
__device__ __forceinline__ void finish(float (&acc)[R][NT], float (*red)[R * NT], int64_t row0, int64_t rows,
                                       int64_t t0, int nt, float* __restrict__ y, const float* __restrict__ bias) {
  const int warp = threadIdx.x >> 5;
  float v[R * NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) v[r * NT + t] = acc[r][t];
  warp_sums<R * NT>(v, red[warp]);
  __syncthreads();
  if (threadIdx.x < R * NT) {
    const int i = threadIdx.x;
    const int r = i / NT, t = i - r * NT;
    const int64_t row = row0 + r;
    if (t < nt && row < rows) {
      float s = ((red[0][i] + red[1][i]) + red[2][i]) + red[3][i];
      if (bias) s = s + bias[row];
      y[(t0 + t) * rows + row] = s;
    }
  }
}

using Mats = memra::ref::GemvMats;

using Segment = GemvSegment;

// The step sequence of a persistent block: (group, phase) pairs in order.
struct Steps {
  int64_t group;
  int phase;
  int phases;
  __device__ __forceinline__ void next() {
    if (++phase == phases) {
      phase = 0;
      group += gridDim.x;
    }
  }
};

// ---- activation quantisation (the int8x32 format, memra/quant.h) ----------------------

// One 32-element block held by 4 consecutive lanes (8 elements each, lanes 4k..4k+3 of a
// warp; every lane of the warp calls this): d, the lane's codes and the block's code sum.
__device__ __forceinline__ void quantize_block8(const float (&e)[8], float& d, int (&q)[8], int& sum) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(e[i]));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  d = __fdiv_rn(amax, 127.0f);
  sum = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    int qi = d != 0.0f ? __float2int_rn(__fdiv_rn(e[i], d)) : 0;
    qi = max(-127, min(127, qi));
    q[i] = qi;
    sum += qi;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
}

// 8 elements per thread, 4 threads per 32-element block; x [*][cols] -> q [m][cols], meta
// [m][cols/32] {d, s}. Row i of the output is row rows[i] of x (i when rows is NULL).
// Element loads are scalar, so x needs only 4-byte alignment.
__device__ __forceinline__ void quantize_act_q8(const float* __restrict__ x, int64_t n_groups, int64_t cols,
                                                const int32_t* __restrict__ rows, int8_t* __restrict__ q,
                                                float2* __restrict__ meta) {
  pdl_wait();
  pdl_launch_dependents();
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // group of 8
  const bool active = g < n_groups;  // inactive lanes still join the shuffles (whole blocks of 4)
  float e[8];
  if (active) {
    const int64_t per_row = cols / 8, i = g / per_row;
    const float* src = x + (rows ? static_cast<int64_t>(rows[i]) : i) * cols + (g - i * per_row) * 8;
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = src[k];
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = 0.0f;
  }
  float d;
  int qi[8], sum;
  quantize_block8(e, d, qi, sum);
  if (!active) return;
  uint32_t packed[2] = {0u, 0u};
#pragma unroll
  for (int k = 0; k < 8; ++k) packed[k >> 2] |= (static_cast<uint32_t>(qi[k]) & 0xffu) << (8 * (k & 3));
  reinterpret_cast<uint2*>(q)[g] = make_uint2(packed[0], packed[1]);
  if ((threadIdx.x & 3) == 0) meta[g >> 2] = make_float2(d, __fmul_rn(d, static_cast<float>(sum)));
}

}  // namespace memra::cuda::i8
