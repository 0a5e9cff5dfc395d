#include "host/backend/cuda/module_loader.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "host/backend/cuda/module_entry.hpp"

namespace memra::backend {
namespace {

struct Module {
  cuda::ModuleOpenFn open = nullptr;
};

Result<Module> load_module(const std::string& module_path) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // The driver first: without it the module cannot even be loaded (it links libcuda).
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    return make_error(ErrorCode::unsupported, std::string("no NVIDIA driver: dlopen(libcuda.so.1) failed (") + (why ? why : "?") +
                                                  "); use the CPU backend on this machine");
  }
  const std::string path = module_path.empty() ? default_cuda_backend_path() : module_path;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return make_error(ErrorCode::unsupported, "cannot load the CUDA backend module " + path + ": " + (why ? why : "?") +
                                                  " (build with -DMEMRA_CUDA=ON, or set MEMRA_CUDA_BACKEND to its path)");
  }
  auto version = reinterpret_cast<cuda::ModuleVersionFn>(dlsym(h, MEMRA_CUDA_MODULE_VERSION_SYMBOL));
  auto open = reinterpret_cast<cuda::ModuleOpenFn>(dlsym(h, MEMRA_CUDA_MODULE_OPEN_SYMBOL));
  if (!version || !open)
    return make_error(ErrorCode::unsupported, path + " is not a memra CUDA backend module (no " MEMRA_CUDA_MODULE_OPEN_SYMBOL "); rebuild it with this host");
  if (const uint32_t v = version(); v != kBackendInterfaceVersion)
    return make_error(ErrorCode::unsupported, path + " was built for backend interface " + std::to_string(v) + ", this host has " +
                                                  std::to_string(kBackendInterfaceVersion) + "; rebuild it with this host");
  return Module{open};  // never dlclose: backends from the module may outlive any one caller
}

}  // namespace

std::string default_cuda_backend_path() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto dir = ec ? std::filesystem::current_path() : exe.parent_path();
  return (dir / ".." / "lib" / "memra" / "libmemra-backend-cuda.so").lexically_normal().string();
}

Result<std::unique_ptr<Backend>> open_cuda_backend(const BackendOptions& options) {
  auto m = load_module(options.module_path);
  if (!m) return m.error();
  std::string error;
  int code = 0;
  Backend* b = m->open(&options, &error, &code);
  if (!b) return make_error(static_cast<ErrorCode>(code), "CUDA backend: " + error);
  return std::unique_ptr<Backend>(b);
}

}  // namespace memra::backend
