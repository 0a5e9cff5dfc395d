// out[i] = x[rows[i]] for the rows whose logits are wanted; a plain copy (bitwise).
#include <stdint.h>

extern "C" __global__ void memra_gather_rows(const float* x, int64_t dim, const int32_t* rows, float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * dim;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = src[i];
}
