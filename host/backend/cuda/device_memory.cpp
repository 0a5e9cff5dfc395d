#include "host/backend/cuda/device_memory.hpp"

#include <algorithm>

#include "host/backend/cuda/cu_error.hpp"

namespace memra::backend::cuda {
namespace {
constexpr uint64_t kAlign = 256;
constexpr uint64_t kMinChunk = 64ull << 20;
constexpr uint64_t kMinPinned = 16ull << 20;
}  // namespace

StepArena::~StepArena() {
  for (Chunk& c : chunks_) cuMemFreeAsync(c.ptr, stream_);
  cuStreamSynchronize(stream_);
}

Result<CUdeviceptr> StepArena::alloc(uint64_t bytes) {
  bytes = align_up(std::max<uint64_t>(bytes, 1), kAlign);
  for (Chunk& c : chunks_) {
    if (c.size - c.used >= bytes) {
      const CUdeviceptr p = c.ptr + c.used;
      c.used += bytes;
      return p;
    }
  }
  Chunk c;
  c.size = std::max(kMinChunk, bytes);
  const CUresult r = cuMemAllocAsync(&c.ptr, c.size, stream_);
  if (r != CUDA_SUCCESS)
    return make_error(ErrorCode::internal, cu_error(r, "cuMemAllocAsync (step scratch)") + "; the GPU is out of memory for this batch");
  c.used = bytes;
  chunks_.push_back(c);
  return c.ptr;
}

void StepArena::reset() {
  uint64_t used = 0;
  for (const Chunk& c : chunks_) used += c.used;
  high_water_ = std::max(high_water_, used);
  if (chunks_.size() > 1) {
    // Stream-ordered frees: later work on the stream cannot overlap the old chunks.
    for (Chunk& c : chunks_) cuMemFreeAsync(c.ptr, stream_);
    chunks_.clear();
    Chunk c;
    c.size = std::max(kMinChunk, align_up(high_water_, kAlign));
    if (cuMemAllocAsync(&c.ptr, c.size, stream_) == CUDA_SUCCESS) chunks_.push_back(c);
  }
  for (Chunk& c : chunks_) c.used = 0;
}

PinnedStaging::~PinnedStaging() {
  if (base_) {
    cuStreamSynchronize(stream_);
    cuMemFreeHost(base_);
  }
}

bool PinnedStaging::fits(uint64_t bytes) const { return used_ + align_up(std::max<uint64_t>(bytes, 1), kAlign) <= size_; }

Result<void*> PinnedStaging::alloc(uint64_t bytes) {
  bytes = align_up(std::max<uint64_t>(bytes, 1), kAlign);
  if (used_ + bytes > size_) {
    // Queued copies may still read the buffer: wait before reusing or replacing it.
    CUresult r = cuStreamSynchronize(stream_);
    if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "cuStreamSynchronize (staging)"));
    used_ = 0;
    if (bytes > size_) {
      if (base_) cuMemFreeHost(base_);
      base_ = nullptr;
      size_ = std::max(kMinPinned, align_up(bytes * 2, kAlign));
      r = cuMemAllocHost(&base_, size_);
      if (r != CUDA_SUCCESS) {
        size_ = 0;
        return make_error(ErrorCode::internal, cu_error(r, "cuMemAllocHost (pinned staging)"));
      }
    }
  }
  void* p = static_cast<uint8_t*>(base_) + used_;
  used_ += bytes;
  return p;
}

}  // namespace memra::backend::cuda
