// moe_ffn v1 (memra/ops.h) on the GPU, around the backend's own matmuls: the routing of
// every row (moe_route.cuh's route_row, the CPU reference's own function: bitwise), each
// expert's output scattered into the (row, choice) slots that picked it, and the weighted
// sum of a row's slots in selection order. Every operation rounds once (__f*_rn; the
// module is built with --fmad=false), so the scatter and the sum are bitwise the
// reference's too.
#include <stdint.h>

#include "kernels/moe/moe_route.cuh"

// routes: [tokens][2 * top_k] words, the chosen experts (int32) then their weights (float).
extern "C" __global__ void memra_moe_route(const float* logits, int32_t tokens, int32_t experts, int32_t top_k,
                                           int32_t normalize, float* routes) {
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  float* row = routes + static_cast<int64_t>(t) * 2 * top_k;
  memra::moe::route_row(logits + static_cast<int64_t>(t) * experts, experts, top_k, normalize != 0,
                        reinterpret_cast<int32_t*>(row), row + top_k);
}

// contrib [tokens][top_k][hidden]: row t's slot i takes expert `expert`'s output of row t
// when the row chose it there. One block per row.
extern "C" __global__ void memra_moe_scatter(const float* out, const float* routes, int32_t top_k, int32_t hidden,
                                             int32_t expert, float* contrib) {
  const int32_t t = blockIdx.x;
  const int32_t* chosen = reinterpret_cast<const int32_t*>(routes + static_cast<int64_t>(t) * 2 * top_k);
  for (int32_t i = 0; i < top_k; ++i) {
    if (chosen[i] != expert) continue;
    float* dst = contrib + (static_cast<int64_t>(t) * top_k + i) * hidden;
    const float* src = out + static_cast<int64_t>(t) * hidden;
    for (int32_t h = threadIdx.x; h < hidden; h += blockDim.x) dst[h] = src[h];
  }
}

// y[t] = w_0 * slot_0 + .. + w_{k-1} * slot_{k-1}, from 0 in that order. One block per row.
extern "C" __global__ void memra_moe_combine(const float* contrib, const float* routes, int32_t top_k, int32_t hidden,
                                             float* y) {
  const int32_t t = blockIdx.x;
  const float* weights = routes + static_cast<int64_t>(t) * 2 * top_k + top_k;
  for (int32_t h = threadIdx.x; h < hidden; h += blockDim.x) {
    float acc = 0.0f;
    for (int32_t i = 0; i < top_k; ++i)
      acc = __fadd_rn(acc, __fmul_rn(weights[i], contrib[(static_cast<int64_t>(t) * top_k + i) * hidden + h]));
    y[static_cast<int64_t>(t) * hidden + h] = acc;
  }
}
