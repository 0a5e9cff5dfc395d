// The ggml tensor type table (GGUF tensor infos carry these ids): names, block
// sizes and bytes per block, and which types memra can dequantize exactly.
#pragma once

#include <cstdint>
#include <string>

namespace memra::quant {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;      // as ggml and gguf-py spell it: "Q4_K", "BF16"
  uint32_t block_size;   // elements per block (1 for plain types)
  uint32_t type_size;    // bytes per block
  bool exact_dequant;    // memra_quant_ref has a bit-exact dequantizer for it
};

// nullptr when the id is not a ggml type memra knows (its size is then unknown too).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
inline const GgmlTypeInfo* ggml_type_info(GgmlType t) { return ggml_type_info(static_cast<uint32_t>(t)); }

// "Q4_K", or "unknown(<id>)" for ids outside the table.
std::string ggml_type_name(uint32_t id);
inline std::string ggml_type_name(GgmlType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

// Type by name ("Q4_K"); false when unknown.
bool ggml_type_from_name(const std::string& name, GgmlType* out);

// Bytes taken by n elements of the type; false when the id is unknown, n is not a
// multiple of the block size, or the size overflows 64 bits.
bool ggml_row_bytes(uint32_t id, uint64_t n, uint64_t* bytes);

// "F32, F16, BF16, Q4_0, ..." — the types with an exact dequantizer, for error messages.
std::string ggml_dequant_supported_list();

}  // namespace memra::quant
