// Step slots of the CUDA backend (cuda_backend.hpp). A pipeline keeps two groups of
// sequences in flight: stage 0 computes group A's next step while stage 1 still
// computes group B's. Each group's steps use their own slot: their own step scratch,
// batch uploads and pinned logits buffers, so starting a step in one slot waits only
// for that slot's previous step (an event), never for the whole stream. The stream
// still runs everything in the order it was issued, which is what keeps the KV cache
// writes of the two groups (different blocks) and the hand-off copies ordered. Each
// slot also keeps its own step graph, replayed while its decode steps repeat.
#include <cstring>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {

memra_status CudaBackend::switch_slot(int32_t slot) {
  if (slot == slot_) return MEMRA_OK;
  // Park the current slot: everything queued so far is its work.
  StepSlot& cur = slots_[slot_];
  CUresult r = cur.done ? CUDA_SUCCESS : cuEventCreate(&cur.done, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = cuEventRecord(cur.done, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "step slot: event"));
  cur.done_pending = true;
  std::swap(arena_, cur.arena);
  std::swap(staging_, cur.staging);
  std::swap(batches_, cur.batches);
  std::swap(graphs_, cur.graphs);
  StepSlot& next = slots_[slot];
  std::swap(arena_, next.arena);
  std::swap(staging_, next.staging);
  std::swap(batches_, next.batches);
  std::swap(graphs_, next.graphs);
  if (!arena_) arena_ = std::make_unique<StepArena>(ctx_.stream());
  if (!staging_) staging_ = std::make_unique<PinnedStaging>(ctx_.stream());
  slot_ = slot;
  return MEMRA_OK;
}

memra_status CudaBackend::begin_step_slot(int32_t slot) {
  if (slot < 0 || slot >= kStepSlots)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "begin_step_slot: slot " + std::to_string(slot) + " is not 0 or 1");
  last_error_.clear();
  const memra_status pending = flush_recorded();
  if (pending != MEMRA_OK) return pending;
  const bool same = slot == slot_;
  if (const memra_status st = switch_slot(slot); st != MEMRA_OK) return st;
  StepSlot& s = slots_[slot];
  if (same) {
    // The same slot as the last step: wait for that step (as begin_step does).
    if (auto w = ctx_.synchronize(); !w) return fail(w.error());
  } else if (s.done_pending) {
    // This slot's previous step is done once the event recorded after it has fired;
    // the other slot's work may go on running meanwhile.
    const CUresult r = cuEventSynchronize(s.done);
    if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "step slot: waiting for its previous step"));
  }
  s.done_pending = false;
  s.pending.clear();  // logits nobody collected: the step they belonged to was abandoned
  reset_step_scratch();  // each slot keeps its own step graph: its scratch addresses repeat
  async_logits_ = true;
  return MEMRA_OK;
}

memra_status CudaBackend::queue_logits(CUdeviceptr logits, void* dst, uint64_t bytes) {
  StepSlot& s = slots_[slot_];
  const size_t index = s.pending.size();
  if (s.logits_host.size() <= index) s.logits_host.emplace_back(nullptr, 0);
  auto& [host, size] = s.logits_host[index];
  if (size < bytes) {
    // The slot's previous step has finished (begin_step_slot waited): safe to replace.
    if (host) cuMemFreeHost(host);
    host = nullptr;
    size = 0;
    const CUresult r = cuMemAllocHost(&host, bytes);
    if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "cuMemAllocHost (logits)"));
    size = bytes;
  }
  return queue_to_host(host, logits, dst, bytes);
}

memra_status CudaBackend::queue_to_host(void* staged, CUdeviceptr src, void* dst, uint64_t bytes) {
  StepSlot& s = slots_[slot_];
  CUresult r = cuMemcpyDtoHAsync(staged, src, bytes, ctx_.stream());
  if (r == CUDA_SUCCESS && !s.logits_ready) r = cuEventCreate(&s.logits_ready, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = cuEventRecord(s.logits_ready, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "step result copy"));
  s.pending.push_back({staged, dst, bytes});
  return MEMRA_OK;
}

memra_status CudaBackend::wait_logits(int32_t slot) {
  if (slot < 0 || slot >= kStepSlots) return fail(MEMRA_ERR_INVALID_ARGUMENT, "wait_logits: slot is not 0 or 1");
  StepSlot& s = slots_[slot];
  if (s.pending.empty()) return MEMRA_OK;
  const CUresult r = cuEventSynchronize(s.logits_ready);
  if (r != CUDA_SUCCESS) {
    s.pending.clear();
    return fail(MEMRA_ERR_DEVICE, cu_error(r, "logits copy (or an earlier kernel of this step)"));
  }
  for (const StepSlot::Pending& p : s.pending) std::memcpy(p.dst, p.src, p.bytes);
  s.pending.clear();
  return MEMRA_OK;
}

void CudaBackend::release_slots() {
  for (StepSlot& s : slots_) {
    s.batches.clear();
    s.arena.reset();
    s.staging.reset();
    for (auto& [host, size] : s.logits_host)
      if (host) cuMemFreeHost(host);
    s.logits_host.clear();
    for (CachedGraph& g : s.graphs)
      if (g.exec) cuGraphExecDestroy(g.exec);
    s.graphs.clear();
    if (s.done) cuEventDestroy(s.done);
    if (s.logits_ready) cuEventDestroy(s.logits_ready);
    s.done = s.logits_ready = nullptr;
  }
}

}  // namespace memra::backend::cuda
