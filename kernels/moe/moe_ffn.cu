// moe_ffn v1 (memra/ops.h) on the GPU, around the backend's own matmuls: the routing of
// every row (moe_route_ref.cpp's steps: top-k by logit with ties to the lower index, the
// softmax in float32 with the sum in expert order), each expert's output scattered into
// the (row, choice) slots that picked it, and the weighted sum of a row's slots in
// selection order. Every operation rounds once (__f*_rn; the module is built with
// --fmad=false), so the scatter and the sum are bitwise the reference's and the routing
// differs from it only by expf's last bits against the host libm's.
#include <stdint.h>

// routes: [tokens][2 * top_k] words, the chosen experts (int32) then their weights (float).
extern "C" __global__ void memra_moe_route(const float* logits, int32_t tokens, int32_t experts, int32_t top_k,
                                           int32_t normalize, float* routes) {
  const int32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= tokens) return;
  const float* l = logits + static_cast<int64_t>(t) * experts;
  float* row = routes + static_cast<int64_t>(t) * 2 * top_k;
  int32_t* chosen = reinterpret_cast<int32_t*>(row);
  float* weights = row + top_k;
  for (int32_t i = 0; i < top_k; ++i) {
    int32_t best = -1;
    for (int32_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (int32_t j = 0; j < i && !taken; ++j) taken = chosen[j] == e;
      if (!taken && (best < 0 || l[e] > l[best])) best = e;
    }
    chosen[i] = best;
  }
  const float max = l[chosen[0]];
  float sum = 0.0f;
  for (int32_t e = 0; e < experts; ++e) sum = __fadd_rn(sum, expf(__fsub_rn(l[e], max)));
  float picked = 0.0f;
  for (int32_t i = 0; i < top_k; ++i) {
    weights[i] = __fdiv_rn(expf(__fsub_rn(l[chosen[i]], max)), sum);
    picked = __fadd_rn(picked, weights[i]);
  }
  if (normalize)
    for (int32_t i = 0; i < top_k; ++i) weights[i] = __fdiv_rn(weights[i], picked);
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
