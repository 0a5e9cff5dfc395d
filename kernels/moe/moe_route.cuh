// moe_ffn's routing (memra/ops.h, moe_ffn v2): one definition for the CPU reference
// (moe_route_ref.cpp, host/backend/cpu/cpu_moe_ffn.cpp) and the CUDA kernels (moe_ffn.cu),
// so both compute the same bits: every float operation is one IEEE-rounded add, subtract,
// multiply or divide and exp is memra_exp (kernels/sampling/sampling_math.cuh: adds and
// multiplies only, no library call), so the device's expf and the host's libm never decide
// an expert or a weight.
//
// The arithmetic, for one token row of num_experts logits:
//   - selection: top_k experts by logit, highest first, ties to the lower index, comparing
//     order_key(canonical(l)) (a total order: NaN counts as -inf, -0 as +0);
//   - the softmax denominator in a fixed 32-lane order: lane j sums exp(l_e - max) over
//     e = j, j + 32, j + 64, .. in that order from 0, then the 32 partials fold as a warp
//     butterfly does (for off = 16, 8, 4, 2, 1: p[j] += p[j + off] for j < off), which the
//     GPU computes one expert per lane in parallel and the CPU lane by lane: the same bits;
//   - w_i = exp(l_{e_i} - max) / sum, divided by (w_0 + .. + w_{k-1}) (in selection order)
//     when normalize;
//   - a shared expert's gate: sigmoid(g) = 1 / (1 + exp(-g)).
#pragma once

#include <stdint.h>

#include "kernels/sampling/sampling_math.cuh"

namespace memra::moe {

constexpr int32_t kRouteLanes = 32;
constexpr int32_t kMaxTopK = 8;  // MEMRA_MOE_FFN_MAX_TOP_K (memra/ops.h)

// The key selection compares: a > b as floats <=> key(a) > key(b), NaN as -inf.
MEMRA_SAMPLING_HD uint32_t route_key(float logit) { return sampling::order_key(sampling::canonical(logit)); }

// Whether expert a (key ka) beats expert b (key kb): higher key, then the lower index.
MEMRA_SAMPLING_HD bool route_beats(uint32_t ka, int32_t a, uint32_t kb, int32_t b) { return ka > kb || (ka == kb && a < b); }

// Lane `lane`'s part of the softmax denominator: exp(l_e - max) over e = lane, lane + 32, ..
MEMRA_SAMPLING_HD float route_lane_sum(const float* logits, int32_t num_experts, float max, int32_t lane) {
  using namespace memra::sampling;
  float s = 0.0f;
  for (int32_t e = lane; e < num_experts; e += kRouteLanes) s = f_add(s, memra_exp(f_sub(logits[e], max)));
  return s;
}

// The top-k weights from the chosen experts and the denominator (selection order).
MEMRA_SAMPLING_HD void route_weights(const float* logits, const int32_t* experts, int32_t top_k, float max, float sum, bool normalize,
                                     float* weights) {
  using namespace memra::sampling;
  float picked = 0.0f;
  for (int32_t i = 0; i < top_k; ++i) {
    weights[i] = f_div(memra_exp(f_sub(logits[experts[i]], max)), sum);
    picked = f_add(picked, weights[i]);
  }
  if (normalize)
    for (int32_t i = 0; i < top_k; ++i) weights[i] = f_div(weights[i], picked);
}

// A shared expert's gate weight.
MEMRA_SAMPLING_HD float shared_gate(float g) {
  using namespace memra::sampling;
  return f_div(1.0f, f_add(1.0f, memra_exp(f_sub(0.0f, g))));
}

// The whole routing of one row, serially (the CPU reference; the GPU's warp form in
// moe_ffn.cu computes the same steps in parallel): experts[0..top_k) and weights[0..top_k).
MEMRA_SAMPLING_HD void route_row(const float* logits, int32_t num_experts, int32_t top_k, bool normalize, int32_t* experts,
                                 float* weights) {
  using namespace memra::sampling;
  for (int32_t i = 0; i < top_k; ++i) {
    int32_t best = -1;
    uint32_t best_key = 0;
    for (int32_t e = 0; e < num_experts; ++e) {
      bool taken = false;
      for (int32_t j = 0; j < i && !taken; ++j) taken = experts[j] == e;
      if (taken) continue;
      const uint32_t k = route_key(logits[e]);
      if (best < 0 || route_beats(k, e, best_key, best)) best = e, best_key = k;
    }
    experts[i] = best;
  }
  const float max = canonical(logits[experts[0]]);
  float part[kRouteLanes];
  for (int32_t lane = 0; lane < kRouteLanes; ++lane) part[lane] = route_lane_sum(logits, num_experts, max, lane);
  for (int32_t off = kRouteLanes / 2; off > 0; off /= 2)
    for (int32_t lane = 0; lane < off; ++lane) part[lane] = f_add(part[lane], part[lane + off]);
  route_weights(logits, experts, top_k, max, part[0], normalize, weights);
}

}  // namespace memra::moe
