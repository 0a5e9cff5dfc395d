// The example_i8 GEMV (example_i8.h states the arithmetic): one warp per (weight row,
// token), blockIdx.y = token. Compiled to example_i8.fatbin (CMakeLists.txt); the plugin
// loads it through the host's kernel services and launches it with argument sizes.
#include "example_i8.h"

extern "C" __global__ void example_i8_gemv(const unsigned char* w, long long rows, long long cols, const float* x, float* y) {
  const int lane = threadIdx.x & 31;
  const long long r = (long long)blockIdx.x * EXAMPLE_I8_ROWS_PER_BLOCK + (threadIdx.x >> 5);
  const long long t = blockIdx.y;
  if (r >= rows) return;  // the whole warp leaves together
  const unsigned char* rec = w + r * EXAMPLE_I8_ROW_BYTES(cols);
  const float scale = *reinterpret_cast<const float*>(rec);
  const signed char* q = reinterpret_cast<const signed char*>(rec + 4);
  const float* xt = x + t * cols;
  float acc = 0.0f;
  // __fmul_rn/__fadd_rn: never contracted into an FMA, whatever the compile flags.
  for (long long c = lane; c < cols; c += EXAMPLE_I8_LANES) acc = __fadd_rn(acc, __fmul_rn((float)q[c], xt[c]));
  for (int off = 16; off > 0; off >>= 1) acc = __fadd_rn(acc, __shfl_down_sync(0xffffffffu, acc, off));
  if (lane == 0) y[t * rows + r] = __fmul_rn(acc, scale);
}
