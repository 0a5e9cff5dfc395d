// memra-repack --bench: throughput of `--quant keep` on a GGUF, and of validating a
// safetensors checkpoint, both read from the page cache. Without a source it writes
// synthetic llama-shaped checkpoints (random Q4_K blocks / bf16) of the requested size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/plugin_host/plugin_host.hpp"

namespace memra::repack {

struct BenchOptions {
  const plugins::PluginHost* plugins = nullptr;  // reads the checkpoints; required
  std::filesystem::path gguf;         // empty: synthesize one
  std::filesystem::path safetensors;  // empty: synthesize one
  std::filesystem::path work_dir;     // where synthetic inputs and outputs go (default: temp dir)
  uint64_t size_mb = 1024;            // synthetic checkpoint size
  int threads = 0;
  int repeats = 3;                    // best of N
};

// Prints a table to stdout; returns the process exit code.
int run_bench(const BenchOptions& options);

}  // namespace memra::repack
