#include "import_helpers.hpp"

#include <cmath>
#include <cstring>

#include "repack/quant/fp_convert.hpp"

namespace memra::quant_plugin::import {

const memra_checkpoint_tensor* sibling(const memra_import_args& args, std::string_view suffix, size_t* index) {
  if (!args.weight || !args.weight->name) return nullptr;
  const std::string_view w(args.weight->name);
  const size_t dot = w.rfind('.');
  const std::string_view prefix = dot == std::string_view::npos ? std::string_view() : w.substr(0, dot + 1);
  for (size_t i = 0; i < args.sibling_count; ++i) {
    const char* n = args.siblings[i].name;
    if (!n) continue;
    const std::string_view s(n);
    if (s.size() == prefix.size() + suffix.size() && s.substr(0, prefix.size()) == prefix && s.substr(prefix.size()) == suffix) {
      if (index) *index = i;
      return &args.siblings[i];
    }
  }
  return nullptr;
}

int64_t elements(const memra_checkpoint_tensor& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim && i < 8; ++i) n *= t.shape[i];
  return n;
}

namespace {
int width(const char* dtype) {
  if (!dtype) return 0;
  if (std::strcmp(dtype, "F32") == 0) return 4;
  if (std::strcmp(dtype, "BF16") == 0 || std::strcmp(dtype, "F16") == 0) return 2;
  if (std::strcmp(dtype, "F8_E4M3") == 0) return 1;
  return 0;
}
}  // namespace

bool float_dtype(const memra_checkpoint_tensor& t) {
  const int w = width(t.dtype);
  return w > 0 && t.data && t.ndim >= 0 && t.ndim <= 8 && t.bytes == static_cast<uint64_t>(elements(t)) * static_cast<uint64_t>(w);
}

float float_at(const memra_checkpoint_tensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (width(t.dtype)) {
    case 4: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case 2: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return t.dtype[0] == 'B' ? quant::bf16_to_f32(h) : quant::fp16_to_f32(h);
    }
    default:
      return quant::f8_e4m3_to_f32(p[i]);
  }
}

bool all_finite(const memra_checkpoint_tensor& t, std::string* why) {
  const int64_t n = elements(t);
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(float_at(t, i))) {
      if (why) *why = std::string(t.name ? t.name : "?") + " holds a non-finite scale at element " + std::to_string(i);
      return false;
    }
  return true;
}

std::string describe(const memra_checkpoint_tensor& t) {
  std::string s = std::string(t.name ? t.name : "?") + " [";
  for (int32_t i = 0; i < t.ndim && i < 8; ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "] " + (t.dtype ? t.dtype : "?");
}

}  // namespace memra::quant_plugin::import
