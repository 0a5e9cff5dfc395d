#include "host/backend/plugin_kernels.hpp"

#include "core/plugin_host/kernel_services.hpp"

namespace memra::backend {

std::vector<std::string> register_plugin_kernels(Backend& backend, const std::vector<plugins::QuantPlugin>& quants) {
  std::vector<std::string> refused;
  plugins::KernelServices* services = backend.kernel_services();
  if (!services) return refused;
  for (const plugins::QuantPlugin& q : quants) {
    const memra_quant_api& t = q.api();
    if (!MEMRA_STRUCT_HAS(&t, memra_quant_api, register_kernels) || !t.register_kernels) continue;
    plugins::ScopedKernelServices bound(services);
    int32_t added = 0;
    if (Status st = backend.register_kernels(q.info().name, q.ctx(), t.register_kernels, &added); !st) {
      std::string why = st.error().message;
      if (const std::string own = q.last_error(); !own.empty() && why.find(own) == std::string::npos) why += (why.empty() ? "" : ": ") + own;
      refused.push_back("plugin '" + q.info().name + "' on " + backend.name() + ": kernels refused: " + why);
    }
  }
  return refused;
}

std::vector<std::string> register_plugin_ops(Backend& backend, std::span<const ops::PluginOp> ops) {
  std::vector<std::string> refused;
  plugins::ScopedKernelServices bound(backend.kernel_services());
  if (Status st = backend.register_ops(ops, &refused); !st)
    refused.push_back("the ops of family plugin '" + (ops.empty() ? std::string("?") : ops[0].plugin) + "' on " + backend.name() +
                      ": " + st.error().message);
  return refused;
}

}  // namespace memra::backend
