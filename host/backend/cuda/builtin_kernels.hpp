// Registers the CUDA backend's built-in kernels (builtin_kernels.cpp) for the
// registry's device.
#pragma once

#include "host/backend/cuda/kernel_registry.hpp"

namespace memra::backend::cuda {

Status register_builtin_kernels(KernelRegistry& registry);

}  // namespace memra::backend::cuda
