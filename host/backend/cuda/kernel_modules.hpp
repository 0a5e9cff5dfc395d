// Kernel modules: fatbins from the kernel directory (SASS picked by compute
// capability; PTX-only refused unless allowed) and NVRTC-compiled CUBINs. Modules
// and kernels live until the backend is destroyed. Internal.
#pragma once

#include <cuda.h>

#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/backend/cuda/nvrtc_compiler.hpp"
#include "core/common/result.hpp"
#include "memra/abi.h"

namespace memra::backend::cuda {

struct Kernel {
  CUkernel kernel = nullptr;
  CUfunction function = nullptr;
  std::string name;
  // Calls memra::cuda::pdl_wait before touching any other kernel's data
  // (kernels/common/pdl.cuh): step graphs may launch it programmatically (step_graph.cpp).
  bool pdl = false;
  // Dynamic shared memory a launch may ask without the opt-in attribute: none, since the
  // 48 KiB default covers the kernel's static shared memory too; CudaBackend::allow_dynamic_smem
  // raises it to the device's opt-in limit on first need.
  uint32_t dynamic_smem_limit = 0;
};

struct Module {
  std::string name;
  CUlibrary library = nullptr;
  bool degraded = false;  // running from PTX JIT
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
};

using LogFn = std::function<void(memra_log_level, const std::string&)>;

class KernelModules {
 public:
  KernelModules(std::string kernel_dir, int major, int minor, bool allow_ptx_jit, LogFn log);
  KernelModules(const KernelModules&) = delete;
  KernelModules& operator=(const KernelModules&) = delete;
  ~KernelModules();

  // <kernel_dir>/<name>.fatbin, loaded once.
  Result<Module*> load(const std::string& name);
  // A fatbin at `path` (a plugin's own module), loaded once, same SASS/PTX rules.
  Result<Module*> load_file(const std::string& path);
  // An NVRTC-compiled module (cached on disk by the compiler).
  Result<Module*> compile(NvrtcCompiler& nvrtc, const NvrtcRequest& request);
  Result<Kernel*> get(Module* module, const std::string& kernel_name);
  // load + get in one.
  Result<Kernel*> kernel(const std::string& module_name, const std::string& kernel_name);

  const std::string& kernel_dir() const { return kernel_dir_; }

 private:
  Result<Module*> load_stream(const std::string& name, const std::string& path, std::istream& in);
  Result<Module*> from_image(const std::string& name, const void* image, bool degraded);

  std::string kernel_dir_;
  int major_, minor_;
  bool allow_ptx_jit_;
  LogFn log_;
  std::map<std::string, std::unique_ptr<Module>> modules_;
  std::vector<std::unique_ptr<Module>> compiled_;
};

}  // namespace memra::backend::cuda
