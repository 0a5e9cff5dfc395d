// First load of a checkpoint: the host repacks a Hugging Face directory or a .gguf
// into the .memra format once (bit-exact "keep" repack), records the provenance in the
// registry, and later loads reuse that repack. docs/REGISTRY.md, "First-load repacks".
//
// - Named by content: $MEMRA_HOME/repacks/<stem>-<key>.memra, key = sha256(source digest
//   + the options that change the bytes), so the same bytes repacked the same way have
//   one name.
// - One at a time per source across processes: an flock on repacks/.locks/<source>.lock
//   is held from the reuse check to the registry record, so hosts sharing MEMRA_HOME that
//   start together make one repack and the others reuse it.
// - Verified on reuse: the registry row's output hash is manifest.json's sha256, the
//   manifest validates, every tensor matches its CRC-32C, and the source files keep their
//   sizes and are not newer. A damaged repack is removed (directory and row) and made
//   again; one whose source changed is removed and made again.
// - Validated before a byte is written: the repack's own checks (plan against tensors,
//   tokenizer, finite weights) and the caller's (`validate`: the host binds the model).
// - Temporary directories of killed repacks are removed at start.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "core/common/result.hpp"
#include "core/plugin_host/plugin_host.hpp"

namespace memra::engine {

struct ModelCacheOptions {
  std::filesystem::path registry_path;  // the registry that records provenance
  std::filesystem::path cache_dir;      // where first-load repacks are written ($MEMRA_HOME/repacks)
  std::function<void(const std::string&)> log;  // progress and decisions, one line each
  const plugins::PluginHost* plugins = nullptr;  // reads the checkpoint (family plugins); required
  const std::atomic<bool>* cancel = nullptr;     // set: a running repack stops and removes what it wrote
  std::function<Status(std::string_view)> fault;  // RepackOptions::fault (tests)
  // Called before a new repack is written (not on reuse); an error stops the load with
  // nothing written or recorded.
  std::function<Status()> validate;
  std::chrono::milliseconds progress_every{2000};  // a progress line while a repack runs
};

struct PreparedModel {
  std::string path;      // what to open: the .memra directory (or the input, when it is one)
  bool reused = false;   // an earlier repack was found (and verified)
  bool repacked = false; // this call wrote a new repack
};

// `source`: a Hugging Face directory, a .gguf, or a .memra directory (used as is).
Result<PreparedModel> prepare_model(const std::string& source, const ModelCacheOptions& options);

// The lock file that serialises first-load repacks of `source` in `cache_dir`.
std::filesystem::path repack_lock_path(const std::filesystem::path& cache_dir, const std::filesystem::path& source);

}  // namespace memra::engine
