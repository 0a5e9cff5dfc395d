// Module matmul_gemm: the prefill GEMM (gemm_mma.cuh) and its operand passes.
//  - memra_gemm_split_rows: f32 activation rows (optionally gathered by index) into
//    bf16 hi/lo planes;
//  (the weight rows' planes come from each scheme's memra_gemm_dequant_<name>, in the
//  scheme plugin's module: scheme_entries.cuh);
//  - memra_gemm_{precise_wsplit,fast}: the tensor-core product;
//  - memra_gemm_gather_rows / memra_gemm_scatter_rows: bitwise row copies by index
//    (a mixed step's generated rows go through the decode GEMV on their own).
#include "kernels/matmul/gemm_mma.cuh"
#include "kernels/matmul/scheme_entries.cuh"

using memra::cuda::entries::store_planes;

// rows[i] (or i when rows is NULL) of x [*][k] into planes hi/lo [m][lda]; k % 8 == 0.
extern "C" __global__ void __launch_bounds__(256) memra_gemm_split_rows(const float* x, int64_t k, const int32_t* rows,
                                                                        int32_t m, int64_t lda, __nv_bfloat16* hi,
                                                                        __nv_bfloat16* lo) {
  const int32_t i = blockIdx.x;
  if (i >= m) return;
  const int64_t src = rows ? rows[i] : i;
  const float* xr = x + src * k;
  for (int64_t c = static_cast<int64_t>(threadIdx.x) * 8; c < k; c += 256 * 8) {
    const float4 a = *reinterpret_cast<const float4*>(xr + c);
    const float4 b = *reinterpret_cast<const float4*>(xr + c + 4);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    store_planes<8>(v, hi + i * lda + c, lo ? lo + i * lda + c : nullptr);
  }
}

#define MEMRA_DEFINE_GEMM(name, SA, SB)                                                                               \
  extern "C" __global__ void __launch_bounds__(memra::cuda::gemm::kThreads, 2)                                       \
      memra_gemm_##name(const __nv_bfloat16* a_hi, const __nv_bfloat16* a_lo, int64_t lda, int32_t m,               \
                        const __nv_bfloat16* b_hi, const __nv_bfloat16* b_lo, int64_t ldb, int32_t n, int32_t k,     \
                        float* out, int64_t ldo, const int32_t* out_rows, const float* bias) {                       \
    memra::cuda::gemm::gemm_tile<SA, SB>(a_hi, a_lo, lda, m, b_hi, b_lo, ldb, n, k, out, ldo, out_rows, bias);      \
  }
// bf16 weights on bf16 activations (one pass); other weights on f32 activations, both
// operands split (docs/ARCHITECTURE.md, "Per-scheme numerics").
MEMRA_DEFINE_GEMM(precise_wsplit, true, true)
MEMRA_DEFINE_GEMM(fast, false, false)

// out[i] = x[rows[i]] (gather) and out[rows[i]] = y[i] (scatter), rows of k floats.
extern "C" __global__ void __launch_bounds__(256) memra_gemm_gather_rows(const float* x, int64_t k, const int32_t* rows,
                                                                         float* out) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * k;
  float* dst = out + static_cast<int64_t>(blockIdx.x) * k;
  for (int64_t c = threadIdx.x; c < k; c += 256) dst[c] = src[c];
}
extern "C" __global__ void __launch_bounds__(256) memra_gemm_scatter_rows(const float* y, int64_t k, const int32_t* rows,
                                                                          float* out) {
  const float* src = y + static_cast<int64_t>(blockIdx.x) * k;
  float* dst = out + static_cast<int64_t>(rows[blockIdx.x]) * k;
  for (int64_t c = threadIdx.x; c < k; c += 256) dst[c] = src[c];
}
