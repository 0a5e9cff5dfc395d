// family-gemma's CUDA kernel (gemma_kernels.fatbin), built with --fmad=false; its arithmetic
// is gemma_math.h's, shared with the CPU reference in gemma_ops.cpp.
#include <cstdint>

#include "gemma_math.h"

// gemma.softcap: y[i] = cap * tanh(x[i] / cap); y may alias x.
extern "C" __global__ void gemma_softcap(const float* x, long long n, float cap, float* y) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  y[i] = gemma_softcap(x[i], cap);
}
