#include "host/backend/cuda/device_context.hpp"

#include "host/backend/cuda/cu_error.hpp"

namespace memra::backend::cuda {

std::string arch_name(int major, int minor) {
  const int cc = major * 10 + minor;
  const bool has_a = cc == 90 || cc == 100 || cc == 101 || cc == 103 || cc == 120 || cc == 121;
  return "sm_" + std::to_string(cc) + (has_a ? "a" : "");
}

DeviceContext::~DeviceContext() {
  if (ctx_) cuCtxSetCurrent(ctx_);
  if (stream_) cuStreamDestroy(stream_);
  if (retained_) cuDevicePrimaryCtxRelease(device_);
}

Status DeviceContext::open(int ordinal) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::unsupported, cu_error(r, "cuInit") + "; is the NVIDIA driver loaded and a GPU visible?");
  int count = 0;
  cuDeviceGetCount(&count);
  if (ordinal < 0 || ordinal >= count)
    return make_error(ErrorCode::not_found, "CUDA device " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) + " visible)");
  if ((r = cuDeviceGet(&device_, ordinal)) != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuDeviceGet"));
  if ((r = cuDevicePrimaryCtxRetain(&ctx_, device_)) != CUDA_SUCCESS)
    return make_error(ErrorCode::internal, cu_error(r, "cuDevicePrimaryCtxRetain"));
  retained_ = true;
  if ((r = cuCtxSetCurrent(ctx_)) != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuCtxSetCurrent"));
  if ((r = cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
    return make_error(ErrorCode::internal, cu_error(r, "cuStreamCreate"));
  cuDeviceGetAttribute(&major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
  cuDeviceGetAttribute(&minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
  cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_);
  size_t mem = 0;
  cuDeviceTotalMem(&mem, device_);
  total_memory_ = mem;
  char name[256] = {};
  cuDeviceGetName(name, sizeof name, device_);
  name_ = name;
  arch_ = arch_name(major_, minor_);
  // Keep freed stream-ordered memory in the pool instead of returning it each sync.
  CUmemoryPool pool = nullptr;
  if (cuDeviceGetDefaultMemPool(&pool, device_) == CUDA_SUCCESS) {
    cuuint64_t threshold = ~cuuint64_t{0};
    cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  }
  return {};
}

Status DeviceContext::make_current() const {
  const CUresult r = cuCtxSetCurrent(ctx_);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuCtxSetCurrent"));
  return {};
}

Status DeviceContext::synchronize() const {
  const CUresult r = cuStreamSynchronize(stream_);
  if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuStreamSynchronize (an earlier kernel failed)"));
  return {};
}

}  // namespace memra::backend::cuda
