// example.decay_scan on the GPU (example_scan.h states the arithmetic): one thread per
// state element walks the step's rows in batch order, each row updating its sequence's
// slot. Compiled to example_scan.fatbin (CMakeLists.txt); the plugin loads it in
// prepare_cuda and launches it with argument sizes, so a decode step stays one graph.
#include "example_scan.h"

extern "C" __global__ void example_decay_scan(const float* x, float* y, int32_t tokens, int32_t width, float decay,
                                              const int32_t* seq_index, const int32_t* state_slots, char* state,
                                              unsigned long long stride) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= width) return;
  for (int32_t t = 0; t < tokens; ++t) {
    float* s = reinterpret_cast<float*>(state + static_cast<unsigned long long>(state_slots[seq_index[t]]) * stride) + i;
    const float v = __fadd_rn(__fmul_rn(decay, *s), x[static_cast<int64_t>(t) * width + i]);
    *s = v;
    y[static_cast<int64_t>(t) * width + i] = v;
  }
}
