// Elementwise ops: gated activations (out = act(gate) * up) and add. Same
// expressions as kernels/activation/gated_activation_ref, rounded per step
// (--fmad=false); expf/tanhf may differ from the C library by an ulp or two.
#include <stdint.h>

extern "C" __global__ void memra_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = (g / (1.0f + expf(-g))) * up[i];
  }
}

extern "C" __global__ void memra_gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    const float inner = k * (g + 0.044715f * g * g * g);
    out[i] = (0.5f * g * (1.0f + tanhf(inner))) * up[i];
  }
}

extern "C" __global__ void memra_add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
