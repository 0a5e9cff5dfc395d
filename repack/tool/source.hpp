// A checkpoint opened for repacking: a Hugging Face safetensors directory (one file or
// sharded) or a .gguf file. Opening validates everything the readers can check —
// headers, every tensor's bounds inside its file, the config, the embedded tokenizer —
// so a corrupt or truncated source is refused before anything is written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "repack/checkpoint/gguf_tokenizer.hpp"
#include "repack/checkpoint/model_config.hpp"

namespace memra {
class ImportedWeight;  // repack/checkpoint/checkpoint_import.hpp
}

namespace memra::repack {

struct SourceTensor {
  std::string source_name;      // as the source spells it
  std::string name;             // canonical (GGUF-style) name, or source_name when there is none
  std::vector<uint64_t> shape;  // outermost first
  std::string scheme;           // lower-case: bf16, f32, a ggml type, i64, ...
  const uint8_t* data = nullptr;  // into the source's memory map; null when assembled from several segments
  uint64_t bytes = 0;
  // A tensor the family assembles from parts (memra/family.h tensor_parts: stacked
  // per-expert matrices, a split fused one): its bytes in order, whole rows each.
  struct Segment {
    const uint8_t* data;
    uint64_t bytes;
  };
  std::vector<Segment> segments;  // always at least one
  std::filesystem::path file;     // the user's file that holds it (a shard, the .gguf)
  // A weight stored already quantised, read by its quant plugin (checkpoint_import.hpp):
  // scheme and shape are what it becomes; data / bytes the stored codes.
  std::shared_ptr<const ImportedWeight> imported;
};

class Source {
 public:
  // Its config and tensor names come from the family plugin serving its architecture.
  static Result<std::unique_ptr<Source>> open(const std::filesystem::path& path, const plugins::PluginHost& plugins);

  const std::filesystem::path& path() const { return path_; }  // absolute
  const std::string& format() const { return format_; }        // "safetensors" | "gguf"
  const ModelConfig& config() const { return config_; }
  const std::vector<SourceTensor>& tensors() const { return tensors_; }
  // The files the checkpoint digest covers (the weights), absolute, sorted by name.
  const std::vector<std::filesystem::path>& weight_files() const { return weight_files_; }
  // Config and tokenizer files copied alongside (Hugging Face sources): (absolute path, name in the output).
  const std::vector<std::pair<std::filesystem::path, std::string>>& side_files() const { return side_files_; }
  // GGUF sources: the embedded tokenizer, when the file has one.
  const std::optional<gguf::EmbeddedTokenizer>& gguf_tokenizer() const { return gguf_tokenizer_; }
  // The chat template text ("" when none): tokenizer_config.json's, chat_template.jinja, or GGUF's.
  const std::string& chat_template() const { return chat_template_; }

  // Exact float32 values of `count` elements of `t` starting at element `first`
  // (`first` and `count` whole blocks for block schemes). Unsupported for integer types.
  Status to_f32(const SourceTensor& t, uint64_t first, uint64_t count, float* dst) const;
  // True when to_f32 can convert the tensor's scheme.
  static bool convertible(const std::string& scheme);

 private:
  std::filesystem::path path_;
  std::string format_;
  ModelConfig config_;
  std::vector<SourceTensor> tensors_;
  std::vector<std::filesystem::path> weight_files_;
  std::vector<std::pair<std::filesystem::path, std::string>> side_files_;
  std::optional<gguf::EmbeddedTokenizer> gguf_tokenizer_;
  std::string chat_template_;
  std::shared_ptr<const void> keep_;  // the mapped checkpoint
};

// Element count of a shape.
uint64_t element_count(const std::vector<uint64_t>& shape);

}  // namespace memra::repack
