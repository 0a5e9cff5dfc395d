// The .memra manifest: what a repacked model directory holds (docs/FORMAT.md).
//
//   model.memra/
//     manifest.json          this structure as JSON
//     weights-00000.bin ...  blobs: tensors back to back, each at a 256-byte-aligned offset
//     tokenizer.json, tokenizer_config.json   (Hugging Face sources), or
//     tokenizer.gguf.json                     (GGUF sources: the embedded vocabulary)
//     chat_template.jinja    when the source has a chat template
//     source/config.json, source/generation_config.json   (Hugging Face sources, verbatim)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"

namespace memra::format {

inline constexpr std::string_view kFormatName = "memra";
inline constexpr int kFormatVersion = 1;
inline constexpr std::string_view kManifestFile = "manifest.json";
// Tensor offsets are multiples of this: covers every GPU copy/vector alignment and the
// widest CPU vector loads; small enough that padding costs nothing.
inline constexpr uint64_t kAlignment = 256;
// Per-tensor checksums are CRC-32C (docs/FORMAT.md, "Checksums").
inline constexpr std::string_view kChecksumAlgorithm = "crc32c";

struct SourceFile {
  std::string path;    // relative to the source (a shard, config.json, ...)
  uint64_t size = 0;
  std::string sha256;
  int64_t mtime_ns = 0;  // its modification time when read (0: not recorded); freshness compares it
};

struct SourceInfo {
  std::string path;    // absolute path given to memra-repack
  std::string format;  // "safetensors" | "gguf"
  std::string sha256;  // the checkpoint digest (registry checkpoints.sha256): see FORMAT.md
  uint64_t size = 0;   // bytes of the weight files
  std::vector<SourceFile> files;  // weight files (digest inputs), then config/tokenizer files
};

struct TokenizerInfo {
  std::string kind;                 // "hf" | "gguf" | "none"
  std::vector<std::string> files;   // file names inside the directory
  std::string chat_template_file;   // "" when the source has none
};

// One precision decision, for the record: which tensors, at which scheme, why.
struct PrecisionRule {
  std::string tensors;  // a description or pattern ("output.weight", "1-D tensors", ...)
  std::string scheme;
  std::string reason;
};

struct Precision {
  std::string requested;               // --quant: keep | bf16 | f16 | q8_0 | q4_k | ...
  std::vector<PrecisionRule> rules;
};

struct BlobInfo {
  std::string file;   // "weights-00000.bin"
  uint64_t size = 0;
};

struct TensorEntry {
  std::string name;           // canonical (GGUF-style) name when known, else the source name
  std::string source_name;    // as the source spells it
  std::vector<uint64_t> shape;  // outermost first
  std::string scheme;         // lower-case: f32, f16, bf16, q8_0, q4_k, ..., fp8
  uint32_t layout = 1;        // version of the scheme's byte layout
  std::string source_scheme;  // the scheme it had in the source
  uint32_t blob = 0;
  uint64_t offset = 0;        // in the blob, a multiple of the manifest's alignment
  uint64_t bytes = 0;
  std::string checksum;       // CRC-32C of the tensor's bytes, 8 hex digits
};

struct Manifest {
  std::string format = std::string(kFormatName);
  int version = kFormatVersion;
  std::string created_by;     // "memra-repack 0.1.0"
  std::string created_at;     // ISO-8601 UTC
  SourceInfo source;
  std::string config_json;    // model_config_to_json(); embedded as an object
  TokenizerInfo tokenizer;
  Precision precision;
  uint64_t alignment = kAlignment;
  std::string checksum = std::string(kChecksumAlgorithm);
  std::vector<BlobInfo> blobs;
  std::vector<TensorEntry> tensors;
};

std::string manifest_to_json(const Manifest& m);
// Parses and checks the structure: format name, a version this code reads, required
// fields and types. Bounds against the blobs are the reader's job.
Result<Manifest> manifest_from_json(std::string_view text);

}  // namespace memra::format
