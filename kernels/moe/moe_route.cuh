// moe_ffn's routing (memra/ops.h, moe_ffn v1), one function for the CPU reference
// (moe_route_ref.cpp) and the CUDA kernel (moe_ffn.cu's memra_moe_route), so both compute
// the same bits: every float operation is one IEEE-rounded add, subtract or divide and exp
// is memra_exp (kernels/sampling/sampling_math.cuh: adds and multiplies only, no library
// call), so the device's expf and the host's libm never decide a weight.
#pragma once

#include <stdint.h>

#include "kernels/sampling/sampling_math.cuh"

namespace memra::moe {

// experts[0..top_k): the top_k experts by logit, highest first (ties: the lower index);
// weights[i]: softmax over all num_experts logits (max first subtracted, the sum taken in
// expert order) at experts[i], divided by the k weights' sum (in selection order) when
// `normalize`. Selection is on the logits themselves: softmax is monotonic, so this is the
// top-k of the probabilities without their rounding deciding near-ties.
MEMRA_SAMPLING_HD void route_row(const float* logits, int32_t num_experts, int32_t top_k, bool normalize, int32_t* experts,
                                 float* weights) {
  using namespace memra::sampling;
  for (int32_t i = 0; i < top_k; ++i) {
    int32_t best = -1;
    for (int32_t e = 0; e < num_experts; ++e) {
      bool taken = false;
      for (int32_t j = 0; j < i && !taken; ++j) taken = experts[j] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    experts[i] = best;
  }
  const float max = logits[experts[0]];
  float sum = 0.0f;
  for (int32_t e = 0; e < num_experts; ++e) sum = f_add(sum, memra_exp(f_sub(logits[e], max)));
  float picked = 0.0f;
  for (int32_t i = 0; i < top_k; ++i) {
    weights[i] = f_div(memra_exp(f_sub(logits[experts[i]], max)), sum);
    picked = f_add(picked, weights[i]);
  }
  if (normalize)
    for (int32_t i = 0; i < top_k; ++i) weights[i] = f_div(weights[i], picked);
}

}  // namespace memra::moe
