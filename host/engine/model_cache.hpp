// First load of a checkpoint: the host repacks a Hugging Face directory or a
// .gguf into the .memra format once (bit-exact "keep" repack), records the
// provenance in the registry, and later loads reuse that repack.
//
// A repack is reused when the registry has one for the same source path whose
// output directory is a valid .memra, and every source weight file still has the
// size the manifest recorded and is not newer than the repack. Otherwise the
// source is repacked again (the old output is left for the user to remove).
#pragma once

#include <atomic>
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
};

struct PreparedModel {
  std::string path;      // what to open: the .memra directory (or the input, when it is one)
  bool reused = false;   // an earlier repack was found
  bool repacked = false; // this call wrote a new repack
};

// `source`: a Hugging Face directory, a .gguf, or a .memra directory (used as is).
Result<PreparedModel> prepare_model(const std::string& source, const ModelCacheOptions& options);

}  // namespace memra::engine
