// Scheme table, shape checks and the row dispatcher.
#include <cmath>
#include <string>

#include "plugins/quant-common/quantize.hpp"

namespace memra::quant {
namespace {

struct SchemeInfo {
  QuantScheme scheme;
  const char* name;
  int64_t block;        // elements per block
  uint64_t block_bytes; // bytes per block (fp8: the scale + 128 codes)
};

constexpr SchemeInfo kSchemes[] = {
    {QuantScheme::q8_0, "q8_0", 32, 34},
    {QuantScheme::q4_0, "q4_0", 32, 18},
    {QuantScheme::q4_k, "q4_k", 256, 144},
    {QuantScheme::q5_k, "q5_k", 256, 176},
    {QuantScheme::q6_k, "q6_k", 256, 210},
    {QuantScheme::iq4_xs, "iq4_xs", 256, 136},
    {QuantScheme::fp8, "fp8", kFp8Group, 4 + kFp8Group},
};

const SchemeInfo& info(QuantScheme s) {
  for (const SchemeInfo& i : kSchemes)
    if (i.scheme == s) return i;
  return kSchemes[0];
}

void set(std::string* error, std::string message) {
  if (error) *error = std::move(message);
}

}  // namespace

const char* scheme_name(QuantScheme s) { return info(s).name; }

bool parse_scheme(std::string_view name, QuantScheme* out) {
  for (const SchemeInfo& i : kSchemes)
    if (name == i.name) {
      *out = i.scheme;
      return true;
    }
  return false;
}

int64_t scheme_block_size(QuantScheme s) { return info(s).block; }

uint64_t scheme_row_bytes(QuantScheme s, int64_t cols) {
  const SchemeInfo& i = info(s);
  if (cols <= 0 || cols % i.block != 0) return 0;
  return static_cast<uint64_t>(cols / i.block) * i.block_bytes;
}

bool quantize_rows(QuantScheme s, const float* src, int64_t rows, int64_t cols, void* dst, uint64_t dst_bytes,
                   std::string* error) {
  const uint64_t rb = scheme_row_bytes(s, cols);
  if (rb == 0 || rows < 0) {
    set(error, std::string(scheme_name(s)) + " needs rows whose length is a multiple of " +
                   std::to_string(scheme_block_size(s)) + " (got " + std::to_string(cols) + " columns)");
    return false;
  }
  if (dst_bytes < rb * static_cast<uint64_t>(rows)) {
    set(error, std::string(scheme_name(s)) + ": destination holds " + std::to_string(dst_bytes) + " bytes, " +
                   std::to_string(rb * static_cast<uint64_t>(rows)) + " needed");
    return false;
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = src + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(x[c])) {
        set(error, std::string("value at row ") + std::to_string(r) + ", column " + std::to_string(c) +
                       " is not finite; " + scheme_name(s) + " cannot hold it");
        return false;
      }
    bool ok = true;
    uint8_t* o = out + rb * static_cast<uint64_t>(r);
    switch (s) {
      case QuantScheme::q8_0: ok = quantize_q8_0(x, o, cols); break;
      case QuantScheme::q4_0: ok = quantize_q4_0(x, o, cols); break;
      case QuantScheme::q4_k: ok = quantize_q4_k(x, o, cols); break;
      case QuantScheme::q5_k: ok = quantize_q5_k(x, o, cols); break;
      case QuantScheme::q6_k: ok = quantize_q6_k(x, o, cols); break;
      case QuantScheme::iq4_xs: ok = quantize_iq4_xs(x, o, cols); break;
      case QuantScheme::fp8: quantize_fp8_row(x, o, cols); break;
    }
    if (!ok) {
      set(error, std::string("row ") + std::to_string(r) + " has values too large for " + scheme_name(s) +
                     "'s float16 scales; keep this tensor in bf16/f32");
      return false;
    }
  }
  return true;
}

}  // namespace memra::quant
