// decay_scan v1 (memra/ops.h) on the GPU: s = decay * s + x[t]; y[t] = s, one rounding per
// operation (__fmul_rn / __fadd_rn), so every element is bitwise decay_scan_ref.cpp's.
// One thread per state element walks the step's rows in batch order (a sequence's rows
// are in position order), each row updating its sequence's slot of the layer's state.
#include <stdint.h>

extern "C" __global__ void memra_decay_scan(const float* x, float* y, int32_t tokens, int32_t width, float decay,
                                            const int32_t* seq_index, const int32_t* state_slots, float* state) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= width) return;
  for (int32_t t = 0; t < tokens; ++t) {
    float* s = state + static_cast<int64_t>(state_slots[seq_index[t]]) * width + i;
    const float v = __fadd_rn(__fmul_rn(decay, *s), x[static_cast<int64_t>(t) * width + i]);
    *s = v;
    y[static_cast<int64_t>(t) * width + i] = v;
  }
}
