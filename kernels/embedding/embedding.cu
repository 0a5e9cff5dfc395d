// Embedding gather: out[t] = dequant(table[ids[t]]) * scale, one block per token.
// Bitwise the CPU oracle (same dequantizers, --fmad=false; scale applied as a
// separate multiply only when it is not 1, like the CPU backend).
#include "kernels/matmul/dequant_units.cuh"

namespace {
using namespace memra::cuda;

template <class S>
__device__ __forceinline__ void embedding_row(const uint8_t* __restrict__ table, int64_t row_bytes, int64_t dim,
                                              const int32_t* __restrict__ ids, float scale, float* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[t]) * row_bytes;
  float* o = out + t * dim;
  const int64_t units = dim / S::kUnit;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    float w[S::kUnit];
    S::unit(row, u, w);
#pragma unroll
    for (int j = 0; j < S::kUnit; ++j) o[u * S::kUnit + j] = scale != 1.0f ? w[j] * scale : w[j];
  }
}

using F32U8 = FloatUnit<SchemeF32, 8>;
using F32U1 = FloatUnit<SchemeF32, 1>;
using F16U8 = FloatUnit<SchemeF16, 8>;
using F16U1 = FloatUnit<SchemeF16, 1>;
using BF16U8 = FloatUnit<SchemeBF16, 8>;
using BF16U1 = FloatUnit<SchemeBF16, 1>;
}  // namespace

#define MEMRA_DEFINE_EMBEDDING(name, S)                                                                   \
  extern "C" __global__ void memra_embedding_##name(const uint8_t* table, int64_t row_bytes, int64_t dim, \
                                                    const int32_t* ids, float scale, float* out) {        \
    embedding_row<S>(table, row_bytes, dim, ids, scale, out);                                             \
  }

MEMRA_DEFINE_EMBEDDING(f32_u8, F32U8)
MEMRA_DEFINE_EMBEDDING(f32_u1, F32U1)
MEMRA_DEFINE_EMBEDDING(f16_u8, F16U8)
MEMRA_DEFINE_EMBEDDING(f16_u1, F16U1)
MEMRA_DEFINE_EMBEDDING(bf16_u8, BF16U8)
MEMRA_DEFINE_EMBEDDING(bf16_u1, BF16U1)
MEMRA_DEFINE_EMBEDDING(q8_0, SchemeQ8_0)
MEMRA_DEFINE_EMBEDDING(q4_0, SchemeQ4_0)
MEMRA_DEFINE_EMBEDDING(q4_k, SchemeQ4_K)
MEMRA_DEFINE_EMBEDDING(q5_k, SchemeQ5_K)
MEMRA_DEFINE_EMBEDDING(q6_k, SchemeQ6_K)
MEMRA_DEFINE_EMBEDDING(iq4_xs, SchemeIQ4_XS)
