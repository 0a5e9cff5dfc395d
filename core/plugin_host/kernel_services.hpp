// What the host's kernel slots (memra_host_api kernel_module_load / _compile /
// kernel_get / kernel_launch) act on: a GPU backend. The CUDA backend's host side
// implements it (host/backend/cuda/module_backend.cpp); core/ knows no CUDA.
//
// Modules are loaded while a backend registers a plugin's kernels: the backend binds
// itself to the calling thread for that call (ScopedKernelServices), and the module and
// kernel handles plugins get back remember the backend, so kernel_launch (from inside a
// registered kernel's matmul) goes to the backend the kernel was loaded on.
#pragma once

#include <string>

#include "memra/host_api.h"

namespace memra::plugins {

class KernelServices {
 public:
  virtual ~KernelServices() = default;
  // `plugin_dir`: the calling plugin's directory, searched first for <name>.fatbin.
  // On failure `error` says why (one line).
  virtual memra_status module_load(const std::string& plugin_dir, const char* name, memra_kernel_module** out,
                                   std::string* error) = 0;
  virtual memra_status module_compile(const memra_nvrtc_request* request, memra_kernel_module** out, std::string* error) = 0;
  virtual memra_status kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out, std::string* error) = 0;
  virtual memra_status kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args,
                                     std::string* error) = 0;
};

// Binds `services` to the calling thread while alive (nesting restores the outer one).
class ScopedKernelServices {
 public:
  explicit ScopedKernelServices(KernelServices* services);
  ~ScopedKernelServices();
  ScopedKernelServices(const ScopedKernelServices&) = delete;
  ScopedKernelServices& operator=(const ScopedKernelServices&) = delete;

 private:
  KernelServices* previous_;
};

// The services bound to this thread, or nullptr.
KernelServices* current_kernel_services();

// The handles host services give plugins: the backend's handle and the backend.
struct KernelModuleHandle {
  KernelServices* owner;
  memra_kernel_module* module;
};
struct KernelHandle {
  KernelServices* owner;
  memra_kernel* kernel;
};

}  // namespace memra::plugins
