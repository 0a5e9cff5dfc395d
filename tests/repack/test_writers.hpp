// Minimal GGUF and safetensors writers for the tests (fabricating small valid
// files, sharding fixtures, seeding the fuzzers). Test-only code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memra::testing {

// GGUF: append-only little-endian byte builder.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Metadata values (type ids as in the GGUF spec).
  void kv_u8(const std::string& k, uint8_t v) { key(k, 0); put(v, 1); ++n_kv_; }
  void kv_i8(const std::string& k, int8_t v) { key(k, 1); put(static_cast<uint8_t>(v), 1); ++n_kv_; }
  void kv_u16(const std::string& k, uint16_t v) { key(k, 2); put(v, 2); ++n_kv_; }
  void kv_i16(const std::string& k, int16_t v) { key(k, 3); put(static_cast<uint16_t>(v), 2); ++n_kv_; }
  void kv_u32(const std::string& k, uint32_t v) { key(k, 4); put(v, 4); ++n_kv_; }
  void kv_i32(const std::string& k, int32_t v) { key(k, 5); put(static_cast<uint32_t>(v), 4); ++n_kv_; }
  void kv_f32(const std::string& k, float v);
  void kv_bool(const std::string& k, bool v) { key(k, 7); put(v ? 1u : 0u, 1); ++n_kv_; }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8); str(v); ++n_kv_; }
  void kv_u64(const std::string& k, uint64_t v) { key(k, 10); put(v, 8); ++n_kv_; }
  void kv_i64(const std::string& k, int64_t v) { key(k, 11); put(static_cast<uint64_t>(v), 8); ++n_kv_; }
  void kv_f64(const std::string& k, double v);
  void kv_str_array(const std::string& k, const std::vector<std::string>& v);
  void kv_i32_array(const std::string& k, const std::vector<int32_t>& v);
  void kv_f32_array(const std::string& k, const std::vector<float>& v);
  // [[1, 2], [3]] as an array of arrays of INT32.
  void kv_nested_i32(const std::string& k, const std::vector<std::vector<int32_t>>& v);

  // Tensors: raw bytes in a given ggml type; offsets are assigned aligned.
  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> data);

  // The whole file. `alignment` pads data (must match general.alignment if written).
  std::vector<uint8_t> finish(uint64_t alignment = 32) const;

 private:
  void key(const std::string& k, uint32_t type) { str(k); put(type, 4); }
  void str(const std::string& s) { put(s.size(), 8); kv_.insert(kv_.end(), s.begin(), s.end()); }
  void put(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) kv_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  uint32_t version_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_;
  std::vector<T> tensors_;
};

// safetensors: tensors are laid out in the order given.
struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;
};
std::vector<uint8_t> write_safetensors(const std::vector<StTensor>& tensors,
                                       const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace memra::testing
