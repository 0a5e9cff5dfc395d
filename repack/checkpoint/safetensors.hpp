// safetensors checkpoints: one file or a sharded set (model.safetensors.index.json),
// memory-mapped; tensor views point straight into the maps (no copies).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/common/result.hpp"
#include "repack/checkpoint/mapped_file.hpp"
#include "repack/checkpoint/safetensors_header.hpp"

namespace memra::safetensors {

// A tensor inside a mapped file. `data` is NOT necessarily aligned for its dtype
// (safetensors does not require it): read elements with memcpy or the helpers below.
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;  // row-major, outermost first
  uint64_t n_elements = 0;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;     // absolute offset in its shard
  size_t shard = 0;             // index into Checkpoint::shard_paths()
};

// One .safetensors file.
class File {
 public:
  static Result<File> open(const std::string& path);

  const std::string& path() const { return map_->path(); }
  const Header& header() const { return header_; }
  const std::vector<TensorView>& tensors() const { return views_; }
  const TensorView* find(std::string_view name) const;

 private:
  std::shared_ptr<const MappedFile> map_;
  Header header_;
  std::vector<TensorView> views_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// A whole checkpoint: a single file or every shard named by an index.
class Checkpoint {
 public:
  // `path` is a .safetensors file, a *.safetensors.index.json, or a directory
  // holding model.safetensors.index.json or model.safetensors.
  static Result<Checkpoint> open(const std::string& path);

  const std::vector<std::string>& shard_paths() const { return shard_paths_; }
  // Every tensor, sorted by name.
  const std::vector<TensorView>& tensors() const { return views_; }
  const TensorView* find(std::string_view name) const;
  // The index's "metadata" object as JSON text ("{}" for a single file); the
  // single file's __metadata__ pairs are in file_metadata().
  const std::string& index_metadata_json() const { return index_metadata_json_; }
  const std::vector<std::pair<std::string, std::string>>& file_metadata() const { return file_metadata_; }

 private:
  std::vector<File> files_;
  std::vector<std::string> shard_paths_;
  std::vector<TensorView> views_;
  std::map<std::string, size_t, std::less<>> by_name_;
  std::string index_metadata_json_ = "{}";
  std::vector<std::pair<std::string, std::string>> file_metadata_;
  friend struct CheckpointBuilder;
};

// Exact conversion of an F32, F16, BF16 or F8_E4M3 tensor to float32 (row-major).
Result<std::vector<float>> to_f32(const TensorView& t);
Status to_f32(const TensorView& t, float* dst, uint64_t n);

}  // namespace memra::safetensors
