#include "kernels/embedding/embedding_ref.hpp"

#include "repack/quant/dequant.hpp"

namespace memra::ref {

bool embedding_rows(quant::GgmlType type, const void* table, int64_t dim, const int32_t* ids, int64_t n,
                    float scale, float* out) {
  uint64_t row_bytes = 0;
  if (!quant::ggml_row_bytes(static_cast<uint32_t>(type), static_cast<uint64_t>(dim), &row_bytes)) return false;
  const auto* base = static_cast<const uint8_t*>(table);
  for (int64_t t = 0; t < n; ++t) {
    float* row = out + t * dim;
    if (!quant::dequantize_row(type, base + row_bytes * static_cast<uint64_t>(ids[t]), row, dim)) return false;
    if (scale != 1.0f)
      for (int64_t i = 0; i < dim; ++i) row[i] *= scale;
  }
  return true;
}

}  // namespace memra::ref
