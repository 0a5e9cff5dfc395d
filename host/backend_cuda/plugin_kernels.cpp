#include "host/backend_cuda/plugin_kernels.hpp"

#include <filesystem>

namespace memra::backend {

memra_status CudaKernelServices::module_load(const std::string& plugin_dir, const char* name, memra_kernel_module** out,
                                             std::string* error) {
  const memra_cuda_backend_api& api = api_;
  // The plugin's own fatbin first (an out-of-tree plugin ships it beside its .so).
  const std::filesystem::path own = std::filesystem::path(plugin_dir) / (std::string(name) + ".fatbin");
  std::error_code ec;
  memra_status st;
  if (!plugin_dir.empty() && std::filesystem::exists(own, ec)) {
    if (!MEMRA_STRUCT_HAS(&api, memra_cuda_backend_api, kernel_module_load_file)) {
      *error = "the CUDA backend module is too old to load a plugin's own fatbin";
      return MEMRA_ERR_UNSUPPORTED;
    }
    st = api.kernel_module_load_file(b_, own.c_str(), out);
  } else {
    st = api.kernel_module_load(b_, name, out);
  }
  if (st != MEMRA_OK) *error = last_error();
  return st;
}

memra_status CudaKernelServices::module_compile(const memra_nvrtc_request* request, memra_kernel_module** out,
                                                std::string* error) {
  const memra_status st = api_.kernel_module_compile(b_, request, out);
  if (st != MEMRA_OK) *error = last_error();
  return st;
}

memra_status CudaKernelServices::kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out,
                                            std::string* error) {
  const memra_status st = api_.kernel_get(b_, module, name, out);
  if (st != MEMRA_OK) *error = last_error();
  return st;
}

memra_status CudaKernelServices::kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args,
                                               std::string* error) {
  const memra_status st = api_.kernel_launch(b_, kernel, config, args);
  if (st != MEMRA_OK) *error = last_error();
  return st;
}

std::vector<std::string> register_plugin_kernels(const memra_cuda_backend_api& api, memra_cuda_backend* b,
                                                 CudaKernelServices& services,
                                                 const std::vector<plugins::QuantPlugin>& quants) {
  std::vector<std::string> refused;
  for (const plugins::QuantPlugin& q : quants) {
    const memra_quant_api& t = q.api();
    if (!MEMRA_STRUCT_HAS(&t, memra_quant_api, register_kernels) || !t.register_kernels) continue;
    const std::string who = "plugin '" + q.info().name + "'";
    if (!MEMRA_STRUCT_HAS(&api, memra_cuda_backend_api, register_plugin_kernels)) {
      refused.push_back(who + ": kernels not registered: the CUDA backend module has no kernel registry (rebuild it)");
      continue;
    }
    plugins::ScopedKernelServices bound(&services);
    int32_t added = 0;
    const memra_status st = api.register_plugin_kernels(b, q.info().name.c_str(), q.ctx(), t.register_kernels, &added);
    if (st != MEMRA_OK) {
      std::string why = api.last_error(b);
      if (const std::string own = q.last_error(); !own.empty() && why.find(own) == std::string::npos) why += (why.empty() ? "" : ": ") + own;
      refused.push_back(who + ": kernels refused (" + memra_status_name(st) + "): " + why);
    }
  }
  return refused;
}

}  // namespace memra::backend
