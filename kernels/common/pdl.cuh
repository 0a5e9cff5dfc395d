// Programmatic dependent launch (sm_90+). A kernel launched with the
// programmatic-stream-serialization attribute (host/backend/cuda/step_graph.cpp, only for
// kernels listed there as PDL-aware) may start before the previous kernel has finished:
// pdl_wait() blocks until that kernel has completed and its writes are visible, so a
// PDL-aware kernel reads no earlier kernel's output and writes nothing before it (it may
// load its weights, which no kernel writes). pdl_launch_dependents() lets the next
// kernel's blocks be scheduled now (they then wait in their own pdl_wait). Launched
// without the attribute both are no-ops, so eager launches are unchanged.
#pragma once

namespace memra::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace memra::cuda
