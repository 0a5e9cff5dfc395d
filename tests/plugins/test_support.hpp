// Shared helpers for the plugin host tests: a log capture sink, paths (temp dirs:
// tests/support/temp_dir.hpp).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::plugins::test {

using memra::testing::TempDir;

// Collects every log line; thread-safe; outlives the host (the sink holds it).
class LogCapture {
 public:
  LogSink sink() const;
  std::vector<std::string> lines() const;
  // Lines containing `needle`.
  std::vector<std::string> containing(std::string_view needle) const;

 private:
  struct State {
    std::mutex mu;
    std::vector<std::string> lines;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The test-only plugin directory and one file in it, e.g. test_plugin("memra-quant-good").
std::filesystem::path test_plugin_dir();
std::filesystem::path test_plugin(std::string_view stem);

// Options that search only `dirs` (no MEMRA_PLUGIN_PATH, no install dir) and log to `log`.
PluginHostOptions isolated_options(const LogCapture& log, std::vector<std::filesystem::path> dirs);

// A CUDA-like device for score tests.
memra_device_info fake_gpu_device();

// True when `file` is currently loaded in this process (dlopen RTLD_NOLOAD).
bool is_loaded(const std::filesystem::path& file);

}  // namespace memra::plugins::test
