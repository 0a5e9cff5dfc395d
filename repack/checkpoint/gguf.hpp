// A GGUF file opened for reading: memory-mapped, header parsed and validated,
// tensor views into the map, exact dequantization to float32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "repack/checkpoint/gguf_parser.hpp"
#include "repack/checkpoint/mapped_file.hpp"

namespace memra::gguf {

struct Tensor {
  const TensorInfo* info = nullptr;  // name, ne (ggml order), type, nbytes
  const uint8_t* data = nullptr;     // aligned to the file's general.alignment
  uint64_t file_offset = 0;          // absolute

  const std::string& name() const { return info->name; }
  quant::GgmlType type() const { return static_cast<quant::GgmlType>(info->type); }
};

struct OpenOptions {
  // Refuse files holding a tensor type memra cannot dequantize exactly (the error
  // names the type and the tensor). Turn off to read metadata / the tokenizer only.
  bool require_dequantizable = true;
};

class File {
 public:
  static Result<File> open(const std::string& path, OpenOptions options = {});

  const std::string& path() const { return map_->path(); }
  const Parsed& parsed() const { return *parsed_; }
  uint32_t version() const { return parsed_->version; }
  uint64_t alignment() const { return parsed_->alignment; }
  uint64_t data_offset() const { return parsed_->data_offset; }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return parsed_->metadata; }
  const Value* find(std::string_view key) const { return parsed_->find(key); }

  // Typed lookups with errors that name the key and what was found.
  Result<std::string> get_string(std::string_view key) const;
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;  // accepts integer values too
  Result<bool> get_bool(std::string_view key) const;

  // general.architecture ("llama", "qwen3", ...), empty if absent.
  std::string architecture() const;

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find_tensor(std::string_view name) const;

  // Exact float32 values in ggml element order (= row-major over reversed ne).
  Result<std::vector<float>> dequantize(const Tensor& t) const;
  Status dequantize(const Tensor& t, float* dst, uint64_t n) const;

  // Error naming every tensor whose type has no exact dequantizer; OK if none.
  Status check_dequantizable() const;

 private:
  std::shared_ptr<const MappedFile> map_;
  std::shared_ptr<const Parsed> parsed_;  // shared so Tensor::info stays put when File moves
  std::vector<Tensor> tensors_;
};

}  // namespace memra::gguf
