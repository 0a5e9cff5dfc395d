// CPU reference of moe_ffn's routing (memra/ops.h, moe_ffn v2): a token row's top-k
// experts by router logit and their weights, and a shared expert's gate —
// moe_route.cuh's functions, which the CUDA kernels run too, so both give the same bits.
#pragma once

#include <cstdint>

namespace memra::ref {

// experts[0..top_k): the top_k experts by logit, highest first (ties: the lower index);
// weights[i]: softmax over all num_experts logits at experts[i] (the denominator summed in
// moe_route.cuh's 32-lane order), divided by the k weights' sum (in selection order) when
// `normalize`.
void moe_route_row(const float* logits, int32_t num_experts, int32_t top_k, bool normalize, int32_t* experts,
                   float* weights);

// sigmoid(g) = 1 / (1 + exp(-g)) with moe_route.cuh's exp: a shared expert's gate weight.
float moe_shared_gate(float g);

}  // namespace memra::ref
