// Driver-API error text. Internal to libmemra-backend-cuda.
#pragma once

#include <cuda.h>

#include <string>

namespace memra::backend::cuda {

inline std::string cu_error(CUresult r, const char* what) {
  const char* name = nullptr;
  const char* text = nullptr;
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
  return std::string(what) + " failed: " + (name ? name : "CUDA_ERROR_?") + " (" + (text ? text : "no description") + ")";
}

}  // namespace memra::backend::cuda
