// Host side of the CUDA backend: finds and opens libmemra-backend-cuda.so at run
// time, only after dlopen("libcuda.so.1") succeeds, so nothing outside the module
// links libcuda and binaries run (on the CPU backend) on machines without a driver.
// Links no CUDA library; safe to build everywhere.
#pragma once

#include <memory>
#include <string>

#include "host/backend_cuda/cuda_backend_api.h"
#include "core/common/result.hpp"

namespace memra::backend {

struct CudaBackendOpenOptions {
  std::string module_path;  // "" = default_cuda_backend_path()
  int device = 0;
  bool allow_ptx_jit = false;
  bool use_nvrtc = true;
  std::string kernel_dir;   // "" = <module dir>/kernels
  std::string cache_dir;    // "" = $MEMRA_HOME/kernel-cache
};

// $MEMRA_CUDA_BACKEND, else <executable dir>/../lib/memra/libmemra-backend-cuda.so.
std::string default_cuda_backend_path();

// The module's table. Fails with `unsupported` and the reason when there is no
// driver (libcuda.so.1) or the module is missing or broken. Libraries stay loaded.
Result<const memra_cuda_backend_api*> load_cuda_backend_api(const std::string& module_path = "");

// An open backend on one device; destroys it on destruction.
class CudaBackendHandle {
 public:
  static Result<std::unique_ptr<CudaBackendHandle>> create(const CudaBackendOpenOptions& options);
  ~CudaBackendHandle();
  CudaBackendHandle(const CudaBackendHandle&) = delete;
  CudaBackendHandle& operator=(const CudaBackendHandle&) = delete;

  const memra_cuda_backend_api& api() const { return *api_; }
  memra_cuda_backend* get() const { return backend_; }
  const memra_backend_ops* ops() const { return api_->ops(backend_); }
  std::string last_error() const { return api_->last_error(backend_); }
  memra_device_info device_info() const;

  Status upload_weights(const memra_weight_set& weights);
  Status allocate_kv(const memra_cuda_kv_config& kv);
  Status begin_step();
  Status copy_kv_block(int32_t from, int32_t to);
  // Pipeline hand-off: `bytes` at `src` (a device address of `from`) to `dst` (one of
  // this backend), stream ordered on both sides (cuda_backend_api.h copy_from_backend).
  Status copy_from(const CudaBackendHandle& from, void* dst, const void* src, uint64_t bytes);
  // Uploads the step's batch before this backend's first op (cuda_backend_api.h prepare_batch).
  Status prepare_batch(const memra_forward_batch& batch);
  // Step slots (cuda_backend_api.h begin_step_slot / wait_logits); unsupported by an
  // older module.
  Status begin_step_slot(int32_t slot);
  Status wait_logits(int32_t slot);
  // Device sampling (cuda_backend_api.h sample_rows): whether the module has it, the
  // tokens of the requested rows, and rows of the kept logits tensor on the host.
  bool has_device_sampling() const;
  Status sample_rows(const memra_cuda_sample_request& request, int32_t* tokens);
  Status logits_rows_to_host(const int32_t* rows, int32_t n, float* dst);
  // A failed memra_status as an Error carrying the backend's last_error.
  Error error(memra_status st, const std::string& what) const;

 private:
  CudaBackendHandle(const memra_cuda_backend_api* api, memra_cuda_backend* b) : api_(api), backend_(b) {}
  const memra_cuda_backend_api* api_;
  memra_cuda_backend* backend_;
};

}  // namespace memra::backend
