#include "kernels/moe/moe_route_ref.hpp"

#include <cmath>

namespace memra::ref {

void moe_route_row(const float* logits, int32_t num_experts, int32_t top_k, bool normalize, int32_t* experts,
                   float* weights) {
  // Selection on the logits themselves: softmax is monotonic, so this is the top-k of
  // the probabilities without their rounding deciding near-ties.
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
  for (int32_t e = 0; e < num_experts; ++e) sum += std::exp(logits[e] - max);
  float picked = 0.0f;
  for (int32_t i = 0; i < top_k; ++i) {
    weights[i] = std::exp(logits[experts[i]] - max) / sum;
    picked += weights[i];
  }
  if (normalize)
    for (int32_t i = 0; i < top_k; ++i) weights[i] /= picked;
}

}  // namespace memra::ref
