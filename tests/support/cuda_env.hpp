// The CUDA backend of this build, for tests: where the build's (or carried build's)
// backend module and kernels are, its options, and why it cannot be used here.
#pragma once

#include <filesystem>
#include <string>

#include "host/backend/backend.hpp"

namespace memra::cuda_test {

// The build (or carried build) root: <exe>/.. when the test runs from <root>/bin.
inline std::filesystem::path binary_root() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(exe.parent_path().parent_path() / "lib" / "memra")) return exe.parent_path().parent_path();
  return MEMRA_BINARY_ROOT;
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

// CUDA devices this process can open a backend on (0 where the backend cannot run),
// counted once (up to 8).
inline int visible_devices() {
  static const int n = [] {
    if (!unavailable_reason().empty()) return 0;
    int count = 0;
    for (; count < 8; ++count) {
      backend::BackendOptions o = options();
      o.device = count;
      if (!backend::open_backend(o)) break;
    }
    return count;
  }();
  return n;
}

}  // namespace memra::cuda_test

// In a test body: skip, with the reason, where the CUDA backend cannot run.
#define MEMRA_SKIP_WITHOUT_CUDA()                                                   \
  do {                                                                              \
    const std::string why_ = memra::cuda_test::unavailable_reason();                \
    if (!why_.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why_;        \
  } while (0)
