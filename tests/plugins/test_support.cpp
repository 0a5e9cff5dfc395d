#include "tests/plugins/test_support.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>

namespace memra::plugins::test {

namespace fs = std::filesystem;

LogSink LogCapture::sink() const {
  std::shared_ptr<State> state = state_;
  return [state](memra_log_level, std::string_view line) {
    std::lock_guard lock(state->mu);
    state->lines.emplace_back(line);
  };
}

std::vector<std::string> LogCapture::lines() const {
  std::lock_guard lock(state_->mu);
  return state_->lines;
}

std::vector<std::string> LogCapture::containing(std::string_view needle) const {
  std::vector<std::string> out;
  for (const std::string& l : lines()) {
    if (l.find(needle) != std::string::npos) out.push_back(l);
  }
  return out;
}

fs::path test_plugin_dir() { return fs::path(MEMRA_TEST_PLUGIN_DIR); }

fs::path test_plugin(std::string_view stem) { return test_plugin_dir() / ("lib" + std::string(stem) + ".so"); }

PluginHostOptions isolated_options(const LogCapture& log, std::vector<fs::path> dirs) {
  PluginHostOptions o;
  o.plugin_dirs = std::move(dirs);
  o.use_env_path = false;
  o.use_install_dir = false;
  o.services.log = log.sink();
  return o;
}

memra_device_info fake_gpu_device() {
  memra_device_info d{};
  d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  d.backend = MEMRA_BACKEND_CUDA;
  d.compute_major = 9;
  d.compute_minor = 0;
  d.multiprocessor_count = 132;
  d.total_memory_bytes = uint64_t{141} << 30;
  d.arch = "sm_90a";
  d.name = "test GPU";
  return d;
}

bool is_loaded(const fs::path& file) {
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);  // NOLOAD still took a reference
  return true;
}

}  // namespace memra::plugins::test
