// memra-repack's pipeline as a library: source -> precision plan -> .memra directory,
// written atomically (format::Writer), with the source's sha256 computed while the
// tensors are written. Nothing is created before the source has been fully validated.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "core/common/result.hpp"
#include "repack/checkpoint/model_config.hpp"
#include "repack/format/manifest.hpp"
#include "repack/tool/precision.hpp"

namespace memra::repack {

inline constexpr std::string_view kToolName = "memra-repack";
std::string tool_version();  // "memra-repack 0.1.0"

// Counters the caller may poll (from another thread) to draw progress.
struct Progress {
  std::atomic<uint64_t> total_bytes{0};   // source bytes to hash + tensor bytes to write
  std::atomic<uint64_t> done_bytes{0};
  std::atomic<uint64_t> tensors_total{0};
  std::atomic<uint64_t> tensors_done{0};
  std::atomic<int> phase{0};              // 0 validating, 1 writing, 2 committing, 3 done
};

struct RepackOptions {
  // Family plugins (config normalisation, tensor names) and quant plugins; required.
  const plugins::PluginHost* plugins = nullptr;
  std::filesystem::path source;
  // The .memra directory to write; with name_by_content, the directory to write it in.
  std::filesystem::path output;
  // Name the output "<stem>-<key>.memra" in `output`, key = the first 16 hex digits of
  // sha256(source digest + the options that change the bytes): the same checkpoint
  // repacked the same way always gets the same name (first-load repacks). When that
  // directory exists already, nothing is replaced: the result names it (existing).
  bool name_by_content = false;
  std::string name_stem;
  std::string quant = "keep";
  std::vector<SchemeOverride> overrides;  // --tensor-scheme
  int threads = 0;        // tensor workers; 0 = hardware concurrency
  bool overwrite = false;
  bool fsync = true;
  Progress* progress = nullptr;
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by a signal handler) to stop and clean up
  std::function<Status(std::string_view)> fault;  // format::WriterOptions::fault
};

struct RepackResult {
  std::filesystem::path output;   // absolute
  bool existing = false;          // name_by_content: a repack of this name was there; ours was dropped
  std::string manifest_sha256;    // the repack's output hash
  format::Manifest manifest;
  ModelConfig config;
  std::string source_quant;       // dominant scheme of the source's matrices (e.g. "bf16")
  uint64_t parameters = 0;        // elements of every tensor
  double validate_seconds = 0, write_seconds = 0, commit_seconds = 0;
};

Result<RepackResult> repack_checkpoint(const RepackOptions& options);

// The options that change a repack's bytes (quant, --tensor-scheme, format version), as
// JSON: with the source digest they make a content-named repack's key.
std::string content_options_json(const RepackOptions& options);
std::string content_key(const std::string& source_sha256, const RepackOptions& options);

// The checkpoint digest of several files: sha256 of "<sha256>  <name>\n" lines sorted by
// name (sha256sum's format); for one file, that file's sha256.
std::string combined_digest(const std::vector<format::SourceFile>& weight_files);

}  // namespace memra::repack
