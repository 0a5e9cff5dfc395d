// Gated MLP activations, CPU reference: out = act(gate) * up.
#pragma once
#include <cstdint>

namespace memra::ref {

void silu_mul(const float* gate, const float* up, int64_t n, float* out);
// GELU with the tanh approximation (gelu_pytorch_tanh), as Gemma uses.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

}  // namespace memra::ref
