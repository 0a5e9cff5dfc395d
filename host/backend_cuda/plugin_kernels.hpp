// Host side of plugin kernels on the CUDA backend: the kernel services the host's
// memra_host_api kernel slots act on (core/plugin_host/kernel_services.hpp) for one
// CudaBackendHandle, and the registration of quant plugins' kernels in that backend's
// kernel registry (memra_quant_api.register_kernels). No CUDA link: every call goes
// through the backend module's table.
#pragma once

#include <string>
#include <vector>

#include "core/plugin_host/kernel_services.hpp"
#include "core/plugin_host/plugin_host.hpp"
#include "host/backend_cuda/cuda_backend_api.h"

namespace memra::backend {

class CudaKernelServices final : public plugins::KernelServices {
 public:
  CudaKernelServices(const memra_cuda_backend_api& api, memra_cuda_backend* b) : api_(api), b_(b) {}
  memra_status module_load(const std::string& plugin_dir, const char* name, memra_kernel_module** out,
                           std::string* error) override;
  memra_status module_compile(const memra_nvrtc_request* request, memra_kernel_module** out, std::string* error) override;
  memra_status kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out, std::string* error) override;
  memra_status kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args, std::string* error) override;

 private:
  std::string last_error() const { return api_.last_error(b_); }
  const memra_cuda_backend_api& api_;
  memra_cuda_backend* b_;
};

// Calls register_kernels of every plugin in `quants` that has the slot, with `services`
// bound, so its modules load on `cuda`. A plugin whose registration is refused (an arch
// the device cannot run, an unknown op, a failing register_kernels) gets one log line
// naming it and the reason, and contributes no kernels; the others go on. Returns the
// log lines (empty: all registered).
std::vector<std::string> register_plugin_kernels(const memra_cuda_backend_api& api, memra_cuda_backend* b,
                                                 CudaKernelServices& services,
                                                 const std::vector<plugins::QuantPlugin>& quants);

}  // namespace memra::backend
