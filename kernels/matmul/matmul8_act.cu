// The backend's producers of the prepared activation formats (memra/quant.h): int8x32
// (gemv_int8_ref.hpp: quantize_act_q8) and bf16s128 (fp8_act_ref.hpp), for the rows no
// fused producer wrote; and a device-to-device copy kernel that memra-kernel-check
// --bench uses to measure the copy ceiling the GEMVs are compared with.
#include "kernels/matmul/fp8_act.cuh"
#include "kernels/matmul/fp8_units.cuh"
#include "kernels/matmul/gemv_int8.cuh"

// x [m][cols] f32 (cols % 32 == 0) -> q [m][cols] int8, meta [m][cols/32] {d, s}.
// One thread per 8 elements: grid = ceil(m*cols/8 / 256) blocks of 256.
extern "C" __global__ void __launch_bounds__(256) memra_quantize_act_q8(const float* x, int64_t m, int64_t cols,
                                                                       int8_t* q, float2* meta) {
  memra::cuda::i8::quantize_act_q8(x, m * cols / 8, cols, nullptr, q, meta);
}

// The engine's form: output row i from x row rows[i] (i when rows is NULL), so a mixed
// step's generated rows are quantised without a gather. Same grid (m rows).
extern "C" __global__ void __launch_bounds__(256) memra_quantize_act_q8_rows(const float* x, int64_t cols,
                                                                            const int32_t* rows, int64_t m,
                                                                            int8_t* q, float2* meta) {
  memra::cuda::i8::quantize_act_q8(x, m * cols / 8, cols, rows, q, meta);
}

// x [*][cols] f32 (cols % 128 == 0, rows 16-byte aligned) -> plane [m][cols] bf16 in the
// mma's pair order, back [m][cols/128] (fp8_act_ref.hpp). Output row i from x row rows[i]
// (i when rows is NULL), so a mixed step's generated rows are prepared without a gather.
// One warp per 128-element group: grid = ceil(m * cols / 128 / 8) blocks of 256.
extern "C" __global__ void __launch_bounds__(256) memra_prepare_act_fp8_rows(const float* x, int64_t cols, const int32_t* rows,
                                                                            int64_t m, uint2* plane, float* back) {
  memra::cuda::pdl_wait();
  memra::cuda::pdl_launch_dependents();
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t per_row = cols / memra::cuda::kFp8Group;
  if (warp >= m * per_row) return;  // whole warps
  const int64_t i = warp / per_row, gi = warp - i * per_row;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const float* src = x + (rows ? static_cast<int64_t>(rows[i]) : i) * cols + gi * memra::cuda::kFp8Group;
  const float4 v = reinterpret_cast<const float4*>(src)[lane];
  memra::cuda::prepare_vec4_fp8(v, i * cols + gi * memra::cuda::kFp8Group + 4 * lane, plane, back);
}

// dst[i] = src[i] for n 16-byte vectors, grid-stride, 4 loads in flight per thread.
extern "C" __global__ void __launch_bounds__(256) memra_bench_copy(const uint4* src, uint4* dst, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = memra::cuda::i8::ld_stream(src + i + k * stride);
#pragma unroll
    for (int k = 0; k < 4; ++k) dst[i + k * stride] = v[k];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// Spins for `ns` nanoseconds (%globaltimer): the bench queues it ahead of a timed batch
// so that the batch's launches are all queued before the first one starts.
extern "C" __global__ void memra_bench_spin(int64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (static_cast<int64_t>(t - t0) < ns);
}

// Reads n 16-byte vectors once (grid-stride, 4 loads in flight per thread, L1 skipped as
// the GEMVs' weights): the time a perfect streaming read of a weight's bytes takes,
// launch and ramp included. sink is written only on an impossible value.
extern "C" __global__ void __launch_bounds__(256) memra_bench_read(const uint4* src, int64_t n, uint32_t* sink) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = memra::cuda::i8::ld_stream(src + i + k * stride);
#pragma unroll
    for (int k = 0; k < 4; ++k) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = memra::cuda::i8::ld_stream(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}
