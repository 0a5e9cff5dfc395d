#include "repack/quant/ggml_type.hpp"

#include <iterator>

namespace memra::quant {
namespace {

constexpr uint32_t kQK = 256;  // super-block size of the K and IQ families

// Sizes follow the GGUF block layouts (ggml's block_* structs).
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},
    {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", 32, 2 + 16, true},
    {GgmlType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {GgmlType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {GgmlType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {GgmlType::Q8_0, "Q8_0", 32, 2 + 32, true},
    {GgmlType::Q8_1, "Q8_1", 32, 4 + 4 + 32, false},
    {GgmlType::Q2_K, "Q2_K", kQK, 2 + 2 + kQK / 16 + kQK / 4, true},
    {GgmlType::Q3_K, "Q3_K", kQK, 2 + kQK / 4 + kQK / 8 + 12, true},
    {GgmlType::Q4_K, "Q4_K", kQK, 2 + 2 + kQK / 2 + 12, true},
    {GgmlType::Q5_K, "Q5_K", kQK, 2 + 2 + kQK / 2 + kQK / 8 + 12, true},
    {GgmlType::Q6_K, "Q6_K", kQK, 2 + kQK / 2 + kQK / 4 + kQK / 16, true},
    {GgmlType::Q8_K, "Q8_K", kQK, 4 + kQK + kQK / 8, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", kQK, 2 + kQK / 4, false},
    {GgmlType::IQ2_XS, "IQ2_XS", kQK, 2 + kQK / 4 + kQK / 32, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", kQK, 2 + kQK / 4 + kQK / 8, false},
    {GgmlType::IQ1_S, "IQ1_S", kQK, 2 + kQK / 8 + kQK / 16, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 2 + 16, true},
    {GgmlType::IQ3_S, "IQ3_S", kQK, 2 + kQK / 4 + kQK / 8 + kQK / 32 + 4, false},
    {GgmlType::IQ2_S, "IQ2_S", kQK, 2 + kQK / 4 + kQK / 16, false},
    {GgmlType::IQ4_XS, "IQ4_XS", kQK, 2 + 2 + kQK / 2 + kQK / 64, true},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", kQK, kQK / 8 + kQK / 16 + kQK / 32, false},
    {GgmlType::BF16, "BF16", 1, 2, true},
    {GgmlType::TQ1_0, "TQ1_0", kQK, 2 + 4 * 13, false},
    {GgmlType::TQ2_0, "TQ2_0", kQK, 2 + 64, false},
    {GgmlType::MXFP4, "MXFP4", 32, 1 + 16, false},
};

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

std::string ggml_type_name(uint32_t id) {
  if (const auto* t = ggml_type_info(id)) return t->name;
  return "unknown(" + std::to_string(id) + ")";
}

bool ggml_type_from_name(const std::string& name, GgmlType* out) {
  for (const auto& t : kTypes) {
    if (name == t.name) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

bool ggml_row_bytes(uint32_t id, uint64_t n, uint64_t* bytes) {
  const auto* t = ggml_type_info(id);
  if (t == nullptr || n % t->block_size != 0) return false;
  const uint64_t blocks = n / t->block_size;
  if (blocks != 0 && t->type_size > UINT64_MAX / blocks) return false;
  *bytes = blocks * t->type_size;
  return true;
}

std::string ggml_dequant_supported_list() {
  std::string out;
  for (const auto& t : kTypes) {
    if (!t.exact_dequant) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

}  // namespace memra::quant
