// Module matmul_gemm: the prefill GEMM (gemm_mma.cuh) and its operand passes.
//  - memra_gemm_split_rows: f32 activation rows (optionally gathered by index) into
//    bf16 hi/lo planes;
//  - memra_gemm_dequant_<scheme>: weight rows into bf16 hi/lo planes, each element
//    the exact f32 value of the decode path's dequantizer (dequant_units.cuh, used
//    as it is), then split;
//  - memra_gemm_{precise_wsplit,fast}: the tensor-core product;
//  - memra_gemm_gather_rows / memra_gemm_scatter_rows: bitwise row copies by index
//    (a mixed step's generated rows go through the decode GEMV on their own).
#include "kernels/matmul/dequant_units.cuh"
#include "kernels/matmul/fp8_units.cuh"
#include "kernels/matmul/gemm_mma.cuh"

namespace {
using namespace memra::cuda;
using F32U8 = FloatUnit<SchemeF32, 8>;
using F16U8 = FloatUnit<SchemeF16, 8>;

// v = hi + lo: hi = bf16(v) (round to nearest), lo = bf16(v - hi); v - hi is exact.
__device__ __forceinline__ void split_bf16(float v, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(v);
  const float h = __bfloat162float(hi);
  lo = __float2bfloat16_rn(isfinite(h) ? v - h : 0.0f);
}

template <int N>
__device__ __forceinline__ void store_planes(const float* v, __nv_bfloat16* __restrict__ hi, __nv_bfloat16* __restrict__ lo) {
  static_assert(N % 8 == 0, "16-byte stores");
#pragma unroll
  for (int j = 0; j < N; j += 8) {
    __align__(16) __nv_bfloat16 h[8], l[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) split_bf16(v[j + i], h[i], l[i]);
    *reinterpret_cast<uint4*>(hi + j) = *reinterpret_cast<const uint4*>(h);
    if (lo) *reinterpret_cast<uint4*>(lo + j) = *reinterpret_cast<const uint4*>(l);
  }
}

// Thread per unit of S (kUnit consecutive elements of one row); rows x k/kUnit threads.
// The block schemes take Octets<S>: a thread per 8 elements dequantising only those, so a
// warp's stores are 512 contiguous bytes (a thread per 32-element unit wrote 64-byte
// strided pieces and reached about a third of the copy bandwidth on the 27B q4_k prompt;
// a thread per 8 elements dequantising its whole unit was 25 % slower still: H200,
// session 10).
template <class S>
__device__ __forceinline__ void dequant_planes(const uint8_t* __restrict__ w, int64_t row_bytes, int32_t rows, int64_t k,
                                               int64_t ld, __nv_bfloat16* __restrict__ hi, __nv_bfloat16* __restrict__ lo) {
  const int64_t units = k / S::kUnit;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= units * rows) return;
  const int64_t r = id / units, u = id - r * units;
  float v[S::kUnit];
  S::unit(w + r * row_bytes, u, v);
  const int64_t off = r * ld + u * S::kUnit;
  store_planes<S::kUnit>(v, hi + off, lo ? lo + off : nullptr);
}

}  // namespace

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

#define MEMRA_DEFINE_GEMM_DEQUANT(name, S)                                                                           \
  extern "C" __global__ void __launch_bounds__(256)                                                                  \
      memra_gemm_dequant_##name(const uint8_t* w, int64_t row_bytes, int32_t rows, int64_t k, int64_t ld,             \
                                __nv_bfloat16* hi, __nv_bfloat16* lo) {                                              \
    dequant_planes<S>(w, row_bytes, rows, k, ld, hi, lo);                                                            \
  }
MEMRA_DEFINE_GEMM_DEQUANT(f32, F32U8)
MEMRA_DEFINE_GEMM_DEQUANT(f16, F16U8)
MEMRA_DEFINE_GEMM_DEQUANT(q8_0, Octets<SchemeQ8_0>)
MEMRA_DEFINE_GEMM_DEQUANT(q4_0, Octets<SchemeQ4_0>)
MEMRA_DEFINE_GEMM_DEQUANT(q4_k, Octets<SchemeQ4_K>)
MEMRA_DEFINE_GEMM_DEQUANT(q5_k, Octets<SchemeQ5_K>)
MEMRA_DEFINE_GEMM_DEQUANT(q6_k, Octets<SchemeQ6_K>)
MEMRA_DEFINE_GEMM_DEQUANT(iq4_xs, Octets<SchemeIQ4_XS>)

// memra fp8 (fp8_units.cuh): a thread per 32 elements of a row; each value is the CPU
// oracle's e4m3(q) * scale (one rounding), then split into the planes.
extern "C" __global__ void __launch_bounds__(256) memra_gemm_dequant_fp8(const uint8_t* w, int64_t row_bytes, int32_t rows,
                                                                         int64_t k, int64_t ld, __nv_bfloat16* hi,
                                                                         __nv_bfloat16* lo) {
  const int64_t units = k / 32;
  const int64_t id = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= units * rows) return;
  const int64_t r = id / units, u = id - r * units;
  const uint8_t* wr = w + r * row_bytes;
  const float scale = reinterpret_cast<const float*>(wr)[u * 32 / kFp8Group];
  const uint32_t* c = reinterpret_cast<const uint32_t*>(wr + (k / kFp8Group) * 4 + u * 32);
  float v[32];
#pragma unroll
  for (int i = 0; i < 8; ++i) fp8x4_to_float(c[i], v + 4 * i);
#pragma unroll
  for (int j = 0; j < 32; ++j) v[j] = __fmul_rn(v[j], scale);
  const int64_t off = r * ld + u * 32;
  store_planes<32>(v, hi + off, lo ? lo + off : nullptr);
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
