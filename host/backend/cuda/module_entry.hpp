// The two symbols libmemra-backend-cuda.so exports, shared by the module and the
// host-side loader (module_loader.cpp). The module is built with the host, so C++
// types cross; the interface version guards against a module from another build.
#pragma once

#include <cstdint>
#include <string>

#include "host/backend/backend.hpp"

#define MEMRA_CUDA_MODULE_VERSION_SYMBOL "memra_cuda_backend_interface_version"
#define MEMRA_CUDA_MODULE_OPEN_SYMBOL "memra_cuda_backend_open"

namespace memra::backend::cuda {
using ModuleVersionFn = uint32_t (*)();
// A new backend (the caller owns it), or nullptr with *error set (*code: an ErrorCode).
using ModuleOpenFn = Backend* (*)(const BackendOptions* options, std::string* error, int* code);
}  // namespace memra::backend::cuda
