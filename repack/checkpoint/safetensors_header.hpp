// safetensors: the dtype table and the header parser.
//
// File layout: u64 little-endian N, then N bytes of UTF-8 JSON, then the data
// section. The JSON maps tensor names to {"dtype", "shape", "data_offsets": [b, e]}
// (offsets relative to the data section) plus an optional "__metadata__" object of
// string values. This parser works on bytes in memory only (no I/O) so the fuzzer
// can drive it; it validates everything before anything points into the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.hpp"

namespace memra::safetensors {

enum class Dtype {
  BOOL, U8, I8, F8_E4M3, F8_E5M2, F8_E8M0, U16, I16, F16, BF16, U32, I32, F32, U64, I64, F64,
};

const char* dtype_name(Dtype d);
size_t dtype_size(Dtype d);  // bytes per element
bool dtype_from_name(std::string_view name, Dtype* out);
std::string dtype_supported_list();  // for error messages

struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;  // row-major, outermost first; empty = scalar
  uint64_t n_elements = 0;
  uint64_t begin = 0;           // absolute file offsets of the tensor's bytes
  uint64_t end = 0;
};

struct Header {
  uint64_t header_size = 0;     // N, the JSON byte count
  uint64_t data_offset = 0;     // 8 + N
  std::vector<TensorEntry> tensors;  // in data order (sorted by begin, then name)
  std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__
};

// Hard cap on the JSON header; the reference implementation uses the same bound.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Parses and validates the header of a whole safetensors file held in memory
// (`size` = the file's size; every range is checked against it).
Result<Header> parse_header(const uint8_t* file, size_t size);

}  // namespace memra::safetensors
