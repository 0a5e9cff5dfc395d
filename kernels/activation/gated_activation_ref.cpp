#include "kernels/activation/gated_activation_ref.hpp"

#include <cmath>

namespace memra::ref {

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float inner = k * (g + 0.044715f * g * g * g);
    out[i] = (0.5f * g * (1.0f + std::tanh(inner))) * up[i];
  }
}

}  // namespace memra::ref
