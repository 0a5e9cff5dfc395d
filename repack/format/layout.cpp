#include "repack/format/layout.hpp"

#include <cctype>

#include "repack/quant/ggml_type.hpp"
#include "plugins/quant-common/quantize.hpp"

namespace memra::format {
namespace {

// Plain element types (safetensors dtypes, lower-case) and their sizes.
struct Plain {
  std::string_view name;
  uint64_t size;
};
constexpr Plain kPlain[] = {
    {"f32", 4}, {"f16", 2}, {"bf16", 2}, {"f64", 8}, {"f8_e4m3", 1}, {"f8_e5m2", 1}, {"f8_e8m0", 1},
    {"i8", 1},  {"u8", 1},  {"i16", 2},  {"u16", 2}, {"i32", 4},     {"u32", 4},     {"i64", 8},
    {"u64", 8}, {"bool", 1},
};

std::optional<uint64_t> plain_size(std::string_view s) {
  for (const Plain& p : kPlain)
    if (p.name == s) return p.size;
  return std::nullopt;
}

bool ggml_by_scheme(std::string_view scheme, quant::GgmlType* out) {
  std::string upper(scheme);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!quant::ggml_type_from_name(upper, out)) return false;
  return plain_size(scheme) == std::nullopt;  // plain names resolve above, not as ggml types
}

bool mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

}  // namespace

std::optional<uint64_t> tensor_bytes(std::string_view scheme, uint32_t layout, const std::vector<uint64_t>& shape) {
  if (layout != 1) return std::nullopt;
  uint64_t n = 1;
  for (uint64_t d : shape)
    if (!mul(n, d, &n)) return std::nullopt;
  const uint64_t inner = shape.empty() ? 1 : shape.back();
  if (auto size = plain_size(scheme)) {
    uint64_t b;
    return mul(n, *size, &b) ? std::optional<uint64_t>(b) : std::nullopt;
  }
  if (scheme == "fp8") {
    if (inner == 0 || inner % quant::kFp8Group != 0) return std::nullopt;
    const uint64_t rows = n / inner;
    uint64_t row = inner / quant::kFp8Group * 4 + inner, b;
    return mul(rows, row, &b) ? std::optional<uint64_t>(b) : std::nullopt;
  }
  quant::GgmlType t;
  if (!ggml_by_scheme(scheme, &t)) return std::nullopt;
  uint64_t row = 0, b;
  if (inner == 0 || !quant::ggml_row_bytes(static_cast<uint32_t>(t), inner, &row)) return std::nullopt;
  return mul(n / inner, row, &b) ? std::optional<uint64_t>(b) : std::nullopt;
}

uint64_t scheme_block_elements(std::string_view scheme) {
  if (plain_size(scheme)) return 1;
  if (scheme == "fp8") return quant::kFp8Group;
  quant::GgmlType t;
  if (!ggml_by_scheme(scheme, &t)) return 0;
  const quant::GgmlTypeInfo* info = quant::ggml_type_info(t);
  return info ? info->block_size : 0;
}

std::string scheme_of_ggml_type(uint32_t ggml_type) {
  const quant::GgmlTypeInfo* info = quant::ggml_type_info(ggml_type);
  if (!info) return "";
  std::string s = info->name;
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_float_scheme(std::string_view s) { return s == "f32" || s == "f16" || s == "bf16"; }

}  // namespace memra::format
