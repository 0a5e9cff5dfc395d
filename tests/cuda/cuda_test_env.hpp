// Shared by the tests/cuda suites: where the build's binaries, plugins, the backend
// module and the fixtures are, and a way to open the CUDA backend or skip.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "host/backend/backend.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "tests/support/build_plugins.hpp"

namespace memra::cuda_test {

// The build (or carried build) root: <exe>/.. when the test runs from <root>/bin.
inline std::filesystem::path binary_root() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(exe.parent_path().parent_path() / "lib" / "memra")) return exe.parent_path().parent_path();
  return MEMRA_BINARY_ROOT;
}

// $MEMRA_FIXTURES_DIR overrides the configured path (fixtures copied to a GPU machine).
inline std::filesystem::path fixtures_dir() {
  if (const char* p = std::getenv("MEMRA_FIXTURES_DIR"); p && *p) return p;
  return MEMRA_FIXTURES_DIR;
}

inline std::string module_path() { return (binary_root() / "lib" / "memra" / "libmemra-backend-cuda.so").string(); }
inline std::string kernel_dir() { return (binary_root() / "lib" / "memra" / "kernels").string(); }

// The build's CUDA backend on device 0.
inline backend::BackendOptions options() {
  backend::BackendOptions o;
  o.kind = MEMRA_BACKEND_CUDA;
  o.module_path = module_path();
  o.kernel_dir = kernel_dir();
  return o;
}

// Why the CUDA backend cannot be used here ("" when it can): no driver, no module
// in this build, or no GPU. Tests GTEST_SKIP with it.
inline std::string unavailable_reason() {
  static const std::string reason = [] {
    auto b = backend::open_backend(options());
    if (!b) {
      const std::string& m = b.error().message;
      if (m.rfind("no NVIDIA driver", 0) == 0 || m.find("cannot load the CUDA backend module") != std::string::npos ||
          m.find("cuInit") != std::string::npos || m.find("(0 visible)") != std::string::npos)
        return m;
      return std::string();  // a real failure: let the test run and report it
    }
    return std::string();
  }();
  return reason;
}

// The build's plugins only (tests/support/build_plugins.hpp).
inline plugins::PluginHost& build_plugins() { return memra::testing::build_plugins(); }

}  // namespace memra::cuda_test
