// Host side of the CUDA backend: opens libmemra-backend-cuda.so at run time, only
// after dlopen("libcuda.so.1") succeeds, so nothing outside the module links libcuda
// and binaries run (on the CPU backend) on machines without a driver. Links no CUDA
// library; safe to build everywhere.
#pragma once

#include <memory>

#include "host/backend/backend.hpp"

namespace memra::backend {

// A CUDA backend on options.device. Fails with `unsupported` and the reason when there
// is no driver (libcuda.so.1) or the module is missing, broken or from another build.
// The module stays loaded (backends from it may outlive any one caller).
Result<std::unique_ptr<Backend>> open_cuda_backend(const BackendOptions& options);

}  // namespace memra::backend
