// Dispatch by ggml type.
#include "repack/quant/dequant.hpp"

namespace memra::quant {

bool dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (info == nullptr || !info->exact_dequant || n < 0 || n % info->block_size != 0) return false;
  const int64_t nb = n / info->block_size;
  switch (type) {
    case GgmlType::F32: dequantize_f32(src, dst, n); return true;
    case GgmlType::F16: dequantize_f16(src, dst, n); return true;
    case GgmlType::BF16: dequantize_bf16(src, dst, n); return true;
    case GgmlType::Q4_0: dequantize_q4_0(src, dst, nb); return true;
    case GgmlType::Q4_1: dequantize_q4_1(src, dst, nb); return true;
    case GgmlType::Q5_0: dequantize_q5_0(src, dst, nb); return true;
    case GgmlType::Q5_1: dequantize_q5_1(src, dst, nb); return true;
    case GgmlType::Q8_0: dequantize_q8_0(src, dst, nb); return true;
    case GgmlType::Q2_K: dequantize_q2_k(src, dst, nb); return true;
    case GgmlType::Q3_K: dequantize_q3_k(src, dst, nb); return true;
    case GgmlType::Q4_K: dequantize_q4_k(src, dst, nb); return true;
    case GgmlType::Q5_K: dequantize_q5_k(src, dst, nb); return true;
    case GgmlType::Q6_K: dequantize_q6_k(src, dst, nb); return true;
    case GgmlType::IQ4_NL: dequantize_iq4_nl(src, dst, nb); return true;
    case GgmlType::IQ4_XS: dequantize_iq4_xs(src, dst, nb); return true;
    default: return false;
  }
}

}  // namespace memra::quant
