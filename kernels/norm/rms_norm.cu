// RMSNorm and add+RMSNorm, one block of kNormThreads per row. Thread i sums the
// squares of elements i, i+256, ... in order, then the block adds with the fixed
// warp-butterfly/warp-order tree: a row's result depends only on the row and dim,
// never on how many rows the launch has. Same formula as kernels/norm/rms_norm_ref:
// x * (1 / sqrt(sum/dim + eps)) * (w + unit_offset), each step rounded (--fmad=false).
#include <stdint.h>

#include "kernels/common/pdl.cuh"
#include "kernels/common/quantize_q8.cuh"
#include "kernels/common/reduce.cuh"
#include "kernels/matmul/fp8_act.cuh"

namespace {
constexpr int kNormThreads = 256;
constexpr int kPass = 8;  // elements per thread loaded before any store (memory-level parallelism)

// o may alias xr (in place): every element is read and written by the same thread,
// and within a pass all loads precede the stores.
__device__ __forceinline__ void normalize(const float* xr, const float* w, float* o, int64_t dim, float sumsq,
                                          float eps, float unit_offset) {
  const float inv = 1.0f / sqrtf(sumsq / static_cast<float>(dim) + eps);
  for (int64_t base = threadIdx.x; base < dim; base += kPass * kNormThreads) {
    float xv[kPass], wv[kPass];
#pragma unroll
    for (int k = 0; k < kPass; ++k) {
      const int64_t i = base + k * kNormThreads;
      xv[k] = i < dim ? xr[i] : 0.0f;
      wv[k] = i < dim ? w[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPass; ++k) {
      const int64_t i = base + k * kNormThreads;
      if (i < dim) o[i] = (xv[k] * inv) * (wv[k] + unit_offset);
    }
  }
}
}  // namespace

// x and out may alias (in-place per-head norms): each element is read and written
// by the same thread, and every read precedes the block reduction's barrier.
// Thread sums run over i = tid, tid+256, ... in order, whatever the pass size.
extern "C" __global__ void __launch_bounds__(kNormThreads)
    memra_rms_norm(const float* x, const float* w, int64_t dim, float eps, float unit_offset, float* out) {
  __shared__ float scratch[32];
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int64_t base = threadIdx.x; base < dim; base += kPass * kNormThreads) {
    float xv[kPass];
#pragma unroll
    for (int k = 0; k < kPass; ++k) {
      const int64_t i = base + k * kNormThreads;
      xv[k] = i < dim ? xr[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kPass; ++k)
      if (base + k * kNormThreads < dim) s = fmaf(xv[k], xv[k], s);
  }
  s = memra::cuda::block_sum(s, scratch);
  normalize(xr, w, out + static_cast<int64_t>(blockIdx.x) * dim, dim, s, eps, unit_offset);
}

// residual += x; out = rms_norm(residual). Rows up to 8192 keep their elements in
// registers between the sum and the scaling (one pass over memory instead of two:
// this kernel runs twice per layer and was latency bound at 5 us for a 4096 row);
// the sum runs over i = tid, tid+256, ... in order either way, so the bits are the
// same as the two-pass path's, which longer rows take.
// Quantise (the _q8 entry, dim % 256 == 0 and dim <= 8192): the output row is also
// written as int8x32 blocks (q [rows][dim], meta [rows][dim/32], gemv_int8_ref.hpp) for
// the next integer-activation matmul. Warp w holds elements 256j + 32w + lane, i.e. one
// whole block per j, and quantises exactly the value it stores.
template <bool Quantize>
__device__ __forceinline__ void add_rms_norm_row(const float* x, float* residual, const float* w, int64_t dim, float eps,
                                                 float unit_offset, float* out, int8_t* q, float2* meta) {
  __shared__ float scratch[32];
  constexpr int kMaxPer = 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * dim;
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  float* rr = residual + row;
  const float* xr = x + row;
  float s = 0.0f;
  if constexpr (!Quantize) {  // (the host keeps quantised rows within the register path)
    if (dim > static_cast<int64_t>(kNormThreads) * kMaxPer) {
      for (int64_t base = threadIdx.x; base < dim; base += kPass * kNormThreads) {
        float rv[kPass];
#pragma unroll
        for (int k = 0; k < kPass; ++k) {
          const int64_t i = base + k * kNormThreads;
          rv[k] = i < dim ? rr[i] + xr[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < kPass; ++k) {
          const int64_t i = base + k * kNormThreads;
          if (i < dim) {
            rr[i] = rv[k];
            s = fmaf(rv[k], rv[k], s);
          }
        }
      }
      s = memra::cuda::block_sum(s, scratch);
      normalize(rr, w, out + row, dim, s, eps, unit_offset);
      return;
    }
  }
  float rv[kMaxPer], xv[kMaxPer];
#pragma unroll
  for (int j = 0; j < kMaxPer; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(kNormThreads) * j;
    rv[j] = i < dim ? rr[i] : 0.0f;
    xv[j] = i < dim ? xr[i] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kMaxPer; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(kNormThreads) * j;
    if (i < dim) {
      rv[j] = rv[j] + xv[j];
      rr[i] = rv[j];
      s = fmaf(rv[j], rv[j], s);
    }
  }
  s = memra::cuda::block_sum(s, scratch);
  const float inv = 1.0f / sqrtf(s / static_cast<float>(dim) + eps);
  float* o = out + row;
#pragma unroll
  for (int j = 0; j < kMaxPer; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(kNormThreads) * j;
    if (i < dim) {  // uniform over the block when Quantize (dim % 256 == 0)
      const float v = (rv[j] * inv) * (w[i] + unit_offset);
      o[i] = v;
      if constexpr (Quantize) memra::cuda::quantize_lane_q8(v, row + i, q, meta);
    }
  }
}

// The wide form, rows of dim % 4 == 0 up to kWideMax elements: blockDim.x (a multiple of
// 32, chosen by the host from dim alone: min(1024, dim / 4 rounded up to a warp)) threads,
// thread i holding float4s i, i + blockDim.x, ... in registers: one load of the weights
// (before the PDL wait: no kernel writes them), of x and of the residual, all in flight
// together, then one reduction. Thread sums run over its float4s in order, components
// x, y, z, w, then the block sum; the order depends on dim only.
// Also written for the next matmul (dim % 128 == 0; whole warps): the _q8 entry's int8x32
// blocks (eight lanes hold a 32-element block), the _fp8 entry's prepared fp8-GEMV rows
// (fp8_act.cuh: a warp holds a 128-element group, its float4s in order).
constexpr int kWidePer = 4;  // float4s per thread
enum WideOut { kWideF32, kWideQ8, kWideFp8 };
template <int Out>
__device__ __forceinline__ void add_rms_norm_wide(const float* x, float* residual, const float* w, int64_t dim, float eps,
                                                  float unit_offset, float* out, int8_t* q, float2* meta, uint2* plane,
                                                  float* back) {
  __shared__ float scratch[32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * dim;
  const int n4 = static_cast<int>(dim / 4);
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* r4 = reinterpret_cast<float4*>(residual + row);
  const float4* x4 = reinterpret_cast<const float4*>(x + row);
  float4 wv[kWidePer], rv[kWidePer];
#pragma unroll
  for (int j = 0; j < kWidePer; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < n4) wv[j] = w4[i];
  }
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
#pragma unroll
  for (int j = 0; j < kWidePer; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < n4) {
      const float4 a = r4[i], b = x4[i];
      rv[j] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kWidePer; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < n4) {
      r4[i] = rv[j];
      s = fmaf(rv[j].x, rv[j].x, s);
      s = fmaf(rv[j].y, rv[j].y, s);
      s = fmaf(rv[j].z, rv[j].z, s);
      s = fmaf(rv[j].w, rv[j].w, s);
    }
  }
  s = memra::cuda::block_sum(s, scratch);
  const float inv = 1.0f / sqrtf(s / static_cast<float>(dim) + eps);
  float4* o4 = reinterpret_cast<float4*>(out + row);
#pragma unroll
  for (int j = 0; j < kWidePer; ++j) {
    const int i = threadIdx.x + j * blockDim.x;
    if (i < n4) {  // uniform over each warp when Out != kWideF32 (dim % 128 == 0)
      const float4 v = make_float4((rv[j].x * inv) * (wv[j].x + unit_offset), (rv[j].y * inv) * (wv[j].y + unit_offset),
                                   (rv[j].z * inv) * (wv[j].z + unit_offset), (rv[j].w * inv) * (wv[j].w + unit_offset));
      o4[i] = v;
      if constexpr (Out == kWideQ8) memra::cuda::quantize_vec4_q8(v, row + 4 * static_cast<int64_t>(i), q, meta);
      if constexpr (Out == kWideFp8) memra::cuda::prepare_vec4_fp8(v, row + 4 * static_cast<int64_t>(i), plane, back);
    }
  }
}

extern "C" __global__ void __launch_bounds__(1024)
    memra_add_rms_norm_wide(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                            float* out) {
  add_rms_norm_wide<kWideF32>(x, residual, w, dim, eps, unit_offset, out, nullptr, nullptr, nullptr, nullptr);
}

extern "C" __global__ void __launch_bounds__(1024)
    memra_add_rms_norm_wide_q8(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                               float* out, int8_t* q, float2* meta) {
  add_rms_norm_wide<kWideQ8>(x, residual, w, dim, eps, unit_offset, out, q, meta, nullptr, nullptr);
}

extern "C" __global__ void __launch_bounds__(1024)
    memra_add_rms_norm_wide_fp8(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                                float* out, uint2* plane, float* back) {
  add_rms_norm_wide<kWideFp8>(x, residual, w, dim, eps, unit_offset, out, nullptr, nullptr, plane, back);
}

extern "C" __global__ void __launch_bounds__(kNormThreads)
    memra_add_rms_norm(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                       float* out) {
  add_rms_norm_row<false>(x, residual, w, dim, eps, unit_offset, out, nullptr, nullptr);
}

extern "C" __global__ void __launch_bounds__(kNormThreads)
    memra_add_rms_norm_q8(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                          float* out, int8_t* q, float2* meta) {
  add_rms_norm_row<true>(x, residual, w, dim, eps, unit_offset, out, q, meta);
}
