#include "host/backend_cuda/cuda_backend_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace memra::backend {
namespace {

ErrorCode to_code(memra_status st) {
  switch (st) {
    case MEMRA_ERR_INVALID_ARGUMENT: return ErrorCode::invalid_argument;
    case MEMRA_ERR_NOT_FOUND: return ErrorCode::not_found;
    case MEMRA_ERR_UNSUPPORTED: return ErrorCode::unsupported;
    case MEMRA_ERR_IO: return ErrorCode::io;
    default: return ErrorCode::internal;
  }
}

}  // namespace

std::string default_cuda_backend_path() {
  if (const char* p = std::getenv("MEMRA_CUDA_BACKEND"); p && *p) return p;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto dir = ec ? std::filesystem::current_path() : exe.parent_path();
  return (dir / ".." / "lib" / "memra" / "libmemra-backend-cuda.so").lexically_normal().string();
}

Result<const memra_cuda_backend_api*> load_cuda_backend_api(const std::string& module_path) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // The driver first: without it the module cannot even be loaded (it links libcuda).
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    return make_error(ErrorCode::unsupported, std::string("no NVIDIA driver: dlopen(libcuda.so.1) failed (") + (why ? why : "?") +
                                                  "); use the CPU backend on this machine");
  }
  const std::string path = module_path.empty() ? default_cuda_backend_path() : module_path;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return make_error(ErrorCode::unsupported, "cannot load the CUDA backend module " + path + ": " + (why ? why : "?") +
                                                  " (build with -DMEMRA_CUDA=ON, or set MEMRA_CUDA_BACKEND to its path)");
  }
  auto get = reinterpret_cast<memra_cuda_backend_get_api_fn>(dlsym(h, MEMRA_CUDA_BACKEND_GET_API_SYMBOL));
  const memra_cuda_backend_api* api = get ? get() : nullptr;
  if (!api || api->version != MEMRA_CUDA_BACKEND_API_VERSION || api->struct_size < MEMRA_CUDA_BACKEND_API_MIN_STRUCT_SIZE)
    return make_error(ErrorCode::unsupported, path + " is not a compatible memra CUDA backend (API version mismatch); rebuild it with this host");
  return api;  // never dlclose: objects from the module may outlive any one caller
}

Result<std::unique_ptr<CudaBackendHandle>> CudaBackendHandle::create(const CudaBackendOpenOptions& o) {
  auto api = load_cuda_backend_api(o.module_path);
  if (!api) return api.error();
  memra_cuda_backend_options opts{};
  opts.struct_size = MEMRA_CUDA_BACKEND_OPTIONS_STRUCT_SIZE;
  opts.device_ordinal = o.device;
  opts.allow_ptx_jit = o.allow_ptx_jit ? 1 : 0;
  opts.use_nvrtc = o.use_nvrtc ? 1 : 0;
  opts.kernel_dir = o.kernel_dir.empty() ? nullptr : o.kernel_dir.c_str();
  opts.cache_dir = o.cache_dir.empty() ? nullptr : o.cache_dir.c_str();
  memra_cuda_backend* b = nullptr;
  char err[2048] = {};
  const memra_status st = (*api)->create(&opts, &b, err, sizeof err);
  if (st != MEMRA_OK) return make_error(to_code(st), std::string("CUDA backend: ") + err);
  return std::unique_ptr<CudaBackendHandle>(new CudaBackendHandle(*api, b));
}

CudaBackendHandle::~CudaBackendHandle() { api_->destroy(backend_); }

memra_device_info CudaBackendHandle::device_info() const {
  memra_device_info d{};
  d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  api_->device_info(backend_, &d);
  return d;
}

Error CudaBackendHandle::error(memra_status st, const std::string& what) const {
  return make_error(to_code(st), what + ": " + last_error());
}

Status CudaBackendHandle::upload_weights(const memra_weight_set& weights) {
  const memra_status st = api_->upload_weights(backend_, &weights);
  if (st != MEMRA_OK) return error(st, "uploading the weights to the GPU");
  return {};
}

Status CudaBackendHandle::allocate_kv(const memra_cuda_kv_config& kv) {
  const memra_status st = api_->allocate_kv(backend_, &kv);
  if (st != MEMRA_OK) return error(st, "allocating the KV cache");
  return {};
}

Status CudaBackendHandle::copy_kv_block(int32_t from, int32_t to) {
  const memra_status st = api_->copy_kv_block(backend_, from, to);
  if (st != MEMRA_OK) return error(st, "copying a KV block");
  return {};
}

Status CudaBackendHandle::copy_from(const CudaBackendHandle& from, void* dst, const void* src, uint64_t bytes) {
  if (!MEMRA_STRUCT_HAS(api_, memra_cuda_backend_api, copy_from_backend))
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for pipeline stages (no copy_from_backend); rebuild it with this host");
  if (from.api_ != api_) return make_error(ErrorCode::invalid_argument, "pipeline copy between two different CUDA backend modules");
  const memra_status st = api_->copy_from_backend(backend_, dst, from.backend_, src, bytes);
  if (st != MEMRA_OK) return error(st, "pipeline hand-off copy");
  return {};
}

Status CudaBackendHandle::prepare_batch(const memra_forward_batch& batch) {
  if (!MEMRA_STRUCT_HAS(api_, memra_cuda_backend_api, prepare_batch))
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for pipeline stages (no prepare_batch); rebuild it with this host");
  const memra_status st = api_->prepare_batch(backend_, &batch);
  if (st != MEMRA_OK) return error(st, "uploading the step's batch");
  return {};
}

Status CudaBackendHandle::begin_step() {
  const memra_status st = api_->begin_step(backend_);
  if (st != MEMRA_OK) return error(st, "CUDA step");
  return {};
}

}  // namespace memra::backend

namespace memra::backend {

Status CudaBackendHandle::begin_step_slot(int32_t slot) {
  if (!MEMRA_STRUCT_HAS(api_, memra_cuda_backend_api, begin_step_slot))
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for rolling pipeline steps (no begin_step_slot); rebuild it with this host");
  const memra_status st = api_->begin_step_slot(backend_, slot);
  if (st != MEMRA_OK) return error(st, "CUDA step (slot " + std::to_string(slot) + ")");
  return {};
}

Status CudaBackendHandle::wait_logits(int32_t slot) {
  if (!MEMRA_STRUCT_HAS(api_, memra_cuda_backend_api, wait_logits))
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for rolling pipeline steps (no wait_logits); rebuild it with this host");
  const memra_status st = api_->wait_logits(backend_, slot);
  if (st != MEMRA_OK) return error(st, "CUDA step logits (slot " + std::to_string(slot) + ")");
  return {};
}

bool CudaBackendHandle::has_device_sampling() const {
  return MEMRA_STRUCT_HAS(api_, memra_cuda_backend_api, logits_rows_to_host) && api_->sample_rows && api_->logits_rows_to_host;
}

Status CudaBackendHandle::sample_rows(const memra_cuda_sample_request& request, int32_t* tokens) {
  if (!has_device_sampling())
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for device sampling (no sample_rows); rebuild it with this host");
  const memra_status st = api_->sample_rows(backend_, &request, tokens);
  if (st != MEMRA_OK) return error(st, "sampling on the GPU");
  return {};
}

Status CudaBackendHandle::logits_rows_to_host(const int32_t* rows, int32_t n, float* dst) {
  if (!has_device_sampling())
    return make_error(ErrorCode::unsupported, "the CUDA backend module is too old for device sampling (no logits_rows_to_host); rebuild it with this host");
  const memra_status st = api_->logits_rows_to_host(backend_, rows, n, dst);
  if (st != MEMRA_OK) return error(st, "copying logits rows from the GPU");
  return {};
}

}  // namespace memra::backend
