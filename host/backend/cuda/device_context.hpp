// The device, its primary context and the backend's one stream. Internal.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/common/result.hpp"

namespace memra::backend::cuda {

class DeviceContext {
 public:
  DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext();

  Status open(int ordinal);
  // Makes the primary context current on the calling thread (ops may come from any thread).
  Status make_current() const;
  Status synchronize() const;

  CUdevice device() const { return device_; }
  CUstream stream() const { return stream_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  int multiprocessors() const { return sms_; }
  uint64_t total_memory() const { return total_memory_; }
  const std::string& name() const { return name_; }
  // "sm_90a" on a 9.0 device (the arch-specific target the modules carry), else "sm_XY".
  const std::string& arch() const { return arch_; }

 private:
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  bool retained_ = false;
  int major_ = 0, minor_ = 0, sms_ = 0;
  uint64_t total_memory_ = 0;
  std::string name_, arch_;
};

// NVRTC / fatbin architecture name for a compute capability: the arch-specific
// ("a") target where one exists, so architecture-specific code paths stay on.
std::string arch_name(int major, int minor);

}  // namespace memra::backend::cuda
