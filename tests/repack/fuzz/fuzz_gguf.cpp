// libFuzzer target: the GGUF parser on arbitrary bytes, then every accessor on
// what it accepted and the exact dequantizers on the tensors it validated.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "repack/checkpoint/gguf_parser.hpp"
#include "repack/quant/dequant.hpp"

namespace {

void walk(const memra::gguf::Value& v, int depth) {
  if (depth > memra::gguf::kMaxArrayNesting + 1) std::abort();
  (void)v.as_int(), (void)v.as_uint(), (void)v.as_float(), (void)v.as_bool(), (void)v.as_string();
  if (const auto* a = v.as_array()) {
    for (uint64_t i = 0; i < a->count && i < 64; ++i) {
      (void)a->int_at(i), (void)a->uint_at(i), (void)a->float_at(i), (void)a->string_at(i);
      if (const auto* inner = a->array_at(i)) walk(*inner, depth + 1);
    }
    (void)a->int_at(a->count), (void)a->float_at(a->count), (void)a->string_at(a->count);  // past the end: nullopt
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = memra::gguf::parse(data, size);
  if (!g.ok()) return 0;
  for (const auto& [key, value] : g->metadata) walk(value, 0);
  std::vector<float> out;
  for (const auto& t : g->tensors) {
    const uint64_t begin = g->data_offset + t.offset;
    if (begin < t.offset || begin > size || t.nbytes > size - begin) std::abort();
    const auto* info = memra::quant::ggml_type_info(t.type);
    if (info == nullptr) std::abort();
    if (!info->exact_dequant || t.n_elements > (1u << 16)) continue;
    out.resize(t.n_elements);
    if (!memra::quant::dequantize_row(static_cast<memra::quant::GgmlType>(t.type), data + begin, out.data(),
                                      static_cast<int64_t>(t.n_elements)))
      std::abort();
  }
  return 0;
}
