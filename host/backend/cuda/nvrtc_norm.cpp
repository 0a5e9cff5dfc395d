// The backend's NVRTC use: RMSNorm specialised for one row length (DIM a multiple
// of 128, at most 8192). Each of 128 threads keeps its DIM/128 elements in
// registers (one read of x instead of two) and the loops unroll fully. The
// reduction order is fixed by DIM alone (thread-sequential, warp butterfly, warps in
// order), so a row's result stays independent of the batch; which kernel serves a
// dim (this or the fatbin's) is fixed per backend, never per batch.
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {
namespace {

constexpr const char* kNormSource = R"(
extern "C" __global__ void __launch_bounds__(128)
memra_rms_norm_dim(const float* x, const float* w, float eps, float unit_offset, float* out) {
  constexpr int kPer = MEMRA_DIM / 128;
  __shared__ float partial[4];
  const float* xr = x + (long long)blockIdx.x * MEMRA_DIM;
  float* o = out + (long long)blockIdx.x * MEMRA_DIM;
  float v[kPer];
  float s = 0.0f;
  asm volatile("griddepcontrol.wait;" ::: "memory");  // PDL-aware (kernels/common/pdl.cuh)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    v[j] = xr[threadIdx.x + 128 * j];
    s = fmaf(v[j], v[j], s);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = s;
  __syncthreads();
  const float total = ((partial[0] + partial[1]) + partial[2]) + partial[3];
  const float inv = 1.0f / sqrtf(total / (float)MEMRA_DIM + eps);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int i = threadIdx.x + 128 * j;
    o[i] = (v[j] * inv) * (w[i] + unit_offset);
  }
}
)";

}  // namespace

Kernel* CudaBackend::nvrtc_rms_norm(int64_t dim) {
  if (!options_.use_nvrtc || dim % 128 != 0 || dim > 8192) return nullptr;
  auto it = nvrtc_norms_.find(dim);
  if (it != nvrtc_norms_.end()) return it->second;
  Kernel* k = nullptr;
  if (nvrtc_.available()) {
    NvrtcRequest req;
    req.name = "rms_norm_dim" + std::to_string(dim);
    req.source = kNormSource;
    req.options = {"-DMEMRA_DIM=" + std::to_string(dim)};
    auto m = modules_->compile(nvrtc_, req);
    if (m) {
      auto kk = modules_->get(*m, "memra_rms_norm_dim");
      if (kk) k = *kk;
      else log(MEMRA_LOG_WARN, kk.error().message);
    } else {
      log(MEMRA_LOG_WARN, "NVRTC RMSNorm for dim " + std::to_string(dim) + " unavailable, using the fatbin kernel: " + m.error().message);
    }
  } else {
    log(MEMRA_LOG_INFO, "NVRTC unavailable (" + nvrtc_.unavailable_reason() + "); using fatbin kernels only");
  }
  nvrtc_norms_[dim] = k;
  return k;
}

}  // namespace memra::backend::cuda
