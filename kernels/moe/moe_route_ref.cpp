#include "kernels/moe/moe_route_ref.hpp"

#include "kernels/moe/moe_route.cuh"

namespace memra::ref {

void moe_route_row(const float* logits, int32_t num_experts, int32_t top_k, bool normalize, int32_t* experts,
                   float* weights) {
  moe::route_row(logits, num_experts, top_k, normalize, experts, weights);
}

float moe_shared_gate(float g) { return moe::shared_gate(g); }

}  // namespace memra::ref
