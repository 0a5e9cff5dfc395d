// GGUF (v2/v3) header parser: metadata key/values, tensor infos, alignment.
//
// Layout (little-endian): "GGUF", u32 version, u64 tensor_count, u64 kv_count;
// kv_count x {string key, u32 value_type, value}; tensor_count x {string name,
// u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset}; padding to
// general.alignment (default 32); the tensor data. Strings are u64 length + bytes;
// arrays are u32 element type + u64 count + elements (arrays may nest).
//
// Works on bytes in memory only (no I/O) so the fuzzer can drive it. Every count,
// length and offset is checked against the bytes that remain before anything is
// allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/common/result.hpp"
#include "repack/quant/ggml_type.hpp"

namespace memra::gguf {

enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// "UINT8", "INT32", "FLOAT32", "BOOL", "STRING", "ARRAY", ... (gguf-py's spelling).
const char* value_type_name(ValueType t);
// Bytes of one scalar of type t; 0 for string and array.
size_t scalar_size(ValueType t);

struct Value;

// An array value. Scalars are kept as their raw little-endian bytes (compact for
// 150k-entry vocabularies); strings and nested arrays as objects.
struct Array {
  ValueType elem_type = ValueType::u8;
  uint64_t count = 0;
  std::vector<uint8_t> raw;            // count * scalar_size(elem_type) bytes for scalar arrays
  std::vector<std::string> strings;    // elem_type == string
  std::vector<Value> arrays;           // elem_type == array

  // Element i as an integer (any integer type, or bool), a float (f32/f64), a bool,
  // or a string; nullopt / nullptr when the element type does not match.
  std::optional<int64_t> int_at(uint64_t i) const;
  std::optional<uint64_t> uint_at(uint64_t i) const;
  std::optional<double> float_at(uint64_t i) const;
  const std::string* string_at(uint64_t i) const;
  const Value* array_at(uint64_t i) const;
};

struct Value {
  ValueType type = ValueType::u8;
  uint64_t bits = 0;   // scalars: the raw bits, zero-extended
  std::string str;     // type == string
  Array array;         // type == array

  bool is_integer() const;
  bool is_float() const { return type == ValueType::f32 || type == ValueType::f64; }
  // Any integer type; nullopt if not an integer or out of int64 range.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;  // non-negative integers
  std::optional<double> as_float() const;   // f32 / f64 (exact widening)
  std::optional<bool> as_bool() const;
  const std::string* as_string() const { return type == ValueType::string ? &str : nullptr; }
  const Array* as_array() const { return type == ValueType::array ? &array : nullptr; }
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;   // ggml order: ne[0] is the innermost (contiguous) dimension
  uint32_t type = 0;          // ggml type id (quant::GgmlType)
  uint64_t offset = 0;        // relative to the data section
  uint64_t n_elements = 0;
  uint64_t nbytes = 0;

  // Row-major shape, outermost first (reversed ne) — the numpy / safetensors view.
  std::vector<uint64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute offset of the tensor data section
  uint64_t file_size = 0;
  std::vector<std::pair<std::string, Value>> metadata;  // file order
  std::unordered_map<std::string, size_t> key_index;
  std::vector<TensorInfo> tensors;                        // file order
  std::unordered_map<std::string, size_t> tensor_index;

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;
};

inline constexpr uint32_t kMaxDims = 4;          // GGML_MAX_DIMS
inline constexpr int kMaxArrayNesting = 8;
inline constexpr uint64_t kMaxKeyBytes = 65535;  // the spec's bound on key length

// Parses and validates a whole GGUF file held in memory.
Result<Parsed> parse(const uint8_t* file, size_t size);

}  // namespace memra::gguf
