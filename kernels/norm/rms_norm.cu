// RMSNorm and add+RMSNorm, one block of kNormThreads per row. Thread i sums the
// squares of elements i, i+256, ... in order, then the block adds with the fixed
// warp-butterfly/warp-order tree: a row's result depends only on the row and dim,
// never on how many rows the launch has. Same formula as kernels/norm/rms_norm_ref:
// x * (1 / sqrt(sum/dim + eps)) * (w + unit_offset), each step rounded (--fmad=false).
#include <stdint.h>

#include "kernels/common/reduce.cuh"

namespace {
constexpr int kNormThreads = 256;

__device__ __forceinline__ void normalize(const float* xr, const float* w, float* o, int64_t dim, float sumsq,
                                          float eps, float unit_offset) {
  const float inv = 1.0f / sqrtf(sumsq / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) o[i] = (xr[i] * inv) * (w[i] + unit_offset);
}
}  // namespace

// x and out may alias (in-place per-head norms): each element is read and written
// by the same thread, and every read precedes the block reduction's barrier.
extern "C" __global__ void __launch_bounds__(kNormThreads)
    memra_rms_norm(const float* x, const float* w, int64_t dim, float eps, float unit_offset, float* out) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) s = fmaf(xr[i], xr[i], s);
  s = memra::cuda::block_sum(s, scratch);
  normalize(xr, w, out + static_cast<int64_t>(blockIdx.x) * dim, dim, s, eps, unit_offset);
}

// residual += x; out = rms_norm(residual).
extern "C" __global__ void __launch_bounds__(kNormThreads)
    memra_add_rms_norm(const float* x, float* residual, const float* w, int64_t dim, float eps, float unit_offset,
                       float* out) {
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float* rr = residual + base;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kNormThreads) {
    const float r = rr[i] + x[base + i];
    rr[i] = r;
    s = fmaf(r, r, s);
  }
  s = memra::cuda::block_sum(s, scratch);
  normalize(rr, w, out + base, dim, s, eps, unit_offset);
}
