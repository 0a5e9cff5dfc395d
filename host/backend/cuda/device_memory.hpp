// Device memory of the CUDA backend. Internal.
//  - StepArena: step-scoped scratch (tensor_create, attention partials, batch
//    arrays) bumped out of stream-ordered pool chunks; reset() at each step start.
//    When a step needed several chunks, the next reset frees them and reserves one
//    chunk of the whole size, so steady state is a single chunk and no allocation.
//  - PinnedStaging: page-locked host memory for async uploads and the logits copy,
//    bumped per step; when full it waits for the stream and starts over.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "core/common/result.hpp"

namespace memra::backend::cuda {

class StepArena {
 public:
  explicit StepArena(CUstream stream) : stream_(stream) {}
  StepArena(const StepArena&) = delete;
  StepArena& operator=(const StepArena&) = delete;
  ~StepArena();

  Result<CUdeviceptr> alloc(uint64_t bytes);
  void reset();

 private:
  struct Chunk {
    CUdeviceptr ptr = 0;
    uint64_t size = 0;
    uint64_t used = 0;
  };
  CUstream stream_;
  std::vector<Chunk> chunks_;
  uint64_t high_water_ = 0;  // bytes the last step used in all
};

class PinnedStaging {
 public:
  explicit PinnedStaging(CUstream stream) : stream_(stream) {}
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  // Host memory that stays valid until the next reset() or the next alloc that has
  // to wrap (which first waits for the stream, so queued copies have read it).
  Result<void*> alloc(uint64_t bytes);
  // Whether alloc(bytes) would be served without wrapping (and so without a wait).
  bool fits(uint64_t bytes) const;
  void reset() { used_ = 0; }

 private:
  CUstream stream_;
  void* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t used_ = 0;
};

constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace memra::backend::cuda
