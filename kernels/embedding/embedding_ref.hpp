// Embedding gather, CPU reference: out[t] = dequant(table row ids[t]) * scale, with
// the exact dequantizers of repack/quant (the scale multiply only when scale != 1).
#pragma once
#include <cstdint>

#include "repack/quant/ggml_type.hpp"

namespace memra::ref {

// False when the type has no exact dequantizer or dim breaks its block size.
bool embedding_rows(quant::GgmlType type, const void* table, int64_t dim, const int32_t* ids, int64_t n,
                    float scale, float* out);

}  // namespace memra::ref
