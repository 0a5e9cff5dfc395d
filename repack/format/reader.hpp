// Opens a .memra directory: validates the manifest (format version, every tensor's
// scheme, size, alignment and bounds inside its blob, no overlaps, blob sizes) and
// memory-maps the blobs, so each tensor is a pointer that can be uploaded as is.
// Checksums are verified on request (verify_checksums / ReadOptions).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "repack/format/manifest.hpp"

namespace memra::format {

struct ReadOptions {
  bool verify_checksums = false;  // check every tensor's CRC-32C at open (several GB/s per thread)
  int threads = 0;                // for verification; 0 = hardware concurrency
};

struct Tensor {
  const TensorEntry* entry = nullptr;
  const uint8_t* data = nullptr;  // aligned to the manifest's alignment (page-aligned map + offset)
};

// A directory holding manifest.json.
bool is_memra_dir(const std::filesystem::path& path);

class MemraModel {
 public:
  static Result<MemraModel> open(const std::filesystem::path& dir, const ReadOptions& options = {});

  const std::filesystem::path& dir() const;
  const Manifest& manifest() const;
  const ModelConfig& config() const;
  const std::vector<Tensor>& tensors() const;  // manifest order
  const Tensor* find(std::string_view name) const;

  // Recomputes every tensor's CRC-32C; the error names the first tensor that differs.
  Status verify_checksums(int threads = 0) const;

  struct State;

 private:
  std::shared_ptr<const State> state_;  // shared: Tensor pointers stay valid when moved
};

}  // namespace memra::format
