// Elementwise ops: gated activations (out = act(gate) * up) and add. Same
// expressions as kernels/activation/gated_activation_ref, rounded per step
// (--fmad=false); expf/tanhf may differ from the C library by an ulp or two.
// The _q8 entries also write the output as int8x32 blocks (q [n], meta [n/32],
// gemv_int8_ref.hpp) for the down projection: n % 32 == 0 and a block of 256, so each
// warp's 32 consecutive elements are one whole block and it quantises the values it stores.
// The _fp8 entries write the fp8 GEMV's prepared rows instead (fp8_act_ref.hpp): a thread
// per float4, so each warp's 128 consecutive elements are one whole group.
#include <stdint.h>

#include "kernels/common/pdl.cuh"
#include "kernels/common/quantize_q8.cuh"
#include "kernels/matmul/fp8_act.cuh"

namespace {

__device__ __forceinline__ float silu_of(float g) { return g / (1.0f + expf(-g)); }

__device__ __forceinline__ float gelu_tanh_of(float g) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const float inner = k * (g + 0.044715f * g * g * g);
  return 0.5f * g * (1.0f + tanhf(inner));
}

template <int Act, bool Quantize>  // Act 0 = silu, 1 = gelu_tanh
__device__ __forceinline__ void gated(const float* gate, const float* up, int64_t n, float* out, int8_t* q, float2* meta) {
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    const float v = (Act == 0 ? silu_of(g) : gelu_tanh_of(g)) * up[i];
    out[i] = v;
    if constexpr (Quantize) memra::cuda::quantize_lane_q8(v, i, q, meta);
  }
}

// n % 128 == 0, 16-byte aligned operands; the elements' arithmetic is gated()'s.
template <int Act>
__device__ __forceinline__ void gated_fp8(const float4* gate, const float4* up, int64_t n, float4* out, uint2* plane,
                                          float* back) {
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  const int64_t n4 = n / 4;  // a multiple of 32, as the stride: whole warps per group
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 g = gate[i], u = up[i];
    const float4 v = Act == 0 ? make_float4(silu_of(g.x) * u.x, silu_of(g.y) * u.y, silu_of(g.z) * u.z, silu_of(g.w) * u.w)
                              : make_float4(gelu_tanh_of(g.x) * u.x, gelu_tanh_of(g.y) * u.y, gelu_tanh_of(g.z) * u.z,
                                            gelu_tanh_of(g.w) * u.w);
    out[i] = v;
    memra::cuda::prepare_vec4_fp8(v, 4 * i, plane, back);
  }
}

}  // namespace

extern "C" __global__ void memra_silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated<0, false>(gate, up, n, out, nullptr, nullptr);
}

extern "C" __global__ void memra_gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out) {
  gated<1, false>(gate, up, n, out, nullptr, nullptr);
}

extern "C" __global__ void __launch_bounds__(256) memra_silu_mul_q8(const float* gate, const float* up, int64_t n, float* out,
                                                                   int8_t* q, float2* meta) {
  gated<0, true>(gate, up, n, out, q, meta);
}

extern "C" __global__ void __launch_bounds__(256) memra_gelu_tanh_mul_q8(const float* gate, const float* up, int64_t n,
                                                                        float* out, int8_t* q, float2* meta) {
  gated<1, true>(gate, up, n, out, q, meta);
}

extern "C" __global__ void __launch_bounds__(256) memra_silu_mul_fp8(const float4* gate, const float4* up, int64_t n,
                                                                    float4* out, uint2* plane, float* back) {
  gated_fp8<0>(gate, up, n, out, plane, back);
}

extern "C" __global__ void __launch_bounds__(256) memra_gelu_tanh_mul_fp8(const float4* gate, const float4* up, int64_t n,
                                                                         float4* out, uint2* plane, float* back) {
  gated_fp8<1>(gate, up, n, out, plane, back);
}

extern "C" __global__ void memra_add(const float* a, const float* b, int64_t n, float* out) {
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}
