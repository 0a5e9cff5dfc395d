#include <memory>

#include "host/backend/backend.hpp"
#include "host/backend/cpu/cpu_backend.hpp"
#include "host/backend/cuda/module_loader.hpp"

namespace memra::backend {

Result<std::unique_ptr<Backend>> open_backend(BackendOptions options) {
  options.apply_environment();
  if (options.kind == MEMRA_BACKEND_CUDA) return open_cuda_backend(options);
  if (options.kind == MEMRA_BACKEND_CPU) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options.quant_lookup));
  return make_error(ErrorCode::invalid_argument, "unknown backend kind " + std::to_string(options.kind));
}

}  // namespace memra::backend
