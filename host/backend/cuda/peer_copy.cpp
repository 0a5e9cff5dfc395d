// The CUDA backend's services for pipeline stages (cuda_backend_api.h): the batch
// upload a stage needs before its first op (prepare_batch), and the hand-off between
// two backends (copy_from_backend): an activation tensor of one stage copied into
// another stage's scratch, on the same device (two backends, two streams) or on
// another one (a peer copy). Ordered with a pair of events instead of host waits:
// the receiver's stream waits for the sender's queued work, and the sender's stream
// waits for the copy, so neither stage's later kernels can race it.
#include <mutex>
#include <set>
#include <utility>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {
namespace {

// Lets `peer` reach `owner`'s memory directly: its context allocations (weights, KV)
// and its default memory pool (step scratch, which cuCtxEnablePeerAccess does not
// cover). Once per pair and process. Best effort: without it cuMemcpyPeerAsync
// still copies, staged by the driver, only slower.
void enable_peer_access(CUdevice owner, CUcontext owner_ctx, CUdevice peer, CUcontext peer_ctx) {
  static std::mutex mu;
  static std::set<std::pair<CUdevice, CUdevice>> done;
  std::lock_guard<std::mutex> lock(mu);
  if (!done.insert({owner, peer}).second) return;
  int can = 0;
  if (cuDeviceCanAccessPeer(&can, peer, owner) != CUDA_SUCCESS || !can) return;
  CUcontext prev = nullptr;
  cuCtxGetCurrent(&prev);
  cuCtxSetCurrent(peer_ctx);
  (void)cuCtxEnablePeerAccess(owner_ctx, 0);  // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED is fine
  cuCtxSetCurrent(prev);
  CUmemoryPool pool = nullptr;
  if (cuDeviceGetDefaultMemPool(&pool, owner) == CUDA_SUCCESS) {
    CUmemAccessDesc d{};
    d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d.location.id = peer;
    d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    (void)cuMemPoolSetAccess(pool, &d, 1);
  }
}

}  // namespace

memra_status CudaBackend::copy_from_backend(CudaBackend& from, CUdeviceptr dst, CUdeviceptr src, uint64_t bytes) {
  ++write_epoch_;  // dst is one of this backend's tensors
  if (bytes == 0) return MEMRA_OK;
  if (!dst || !src) return fail(MEMRA_ERR_INVALID_ARGUMENT, "copy_from_backend: NULL address");
  // Step graphs: the copy must follow the sender's recorded ops, so they are launched
  // now as the sender's step graph (replayed when a decode step repeats itself; the
  // sender's rest of the step is eager). A receiver that has recorded nothing yet
  // keeps recording: the copy is issued now, ahead on its stream of the graph that
  // logits_output (or a later hand-off) launches. One that has recorded ops issues
  // them eagerly first, so the copy cannot overtake them.
  if (&from == this) {
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
    const CUresult r = cuMemcpyDtoDAsync(dst, src, bytes, ctx_.stream());
    return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, "pipeline copy"));
  }
  auto sender_failed = [&](memra_status st) {
    (void)make_current();
    return fail(st, "pipeline copy: the sending stage failed: " + from.last_error());
  };
  // 1. The sender: its queued work, then an event the copy waits for.
  if (const memra_status st = from.make_current(); st != MEMRA_OK) return sender_failed(st);
  CUcontext from_ctx = nullptr;
  cuCtxGetCurrent(&from_ctx);
  if (from.recording_) {
    const memra_status st = from.step_ops_.empty() ? MEMRA_OK : from.run_step_graph();
    from.recording_ = false;
    if (st != MEMRA_OK) return sender_failed(st);
  }
  CUevent sent = nullptr;
  CUresult r = cuEventCreate(&sent, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = cuEventRecord(sent, from.ctx_.stream());
  if (r != CUDA_SUCCESS) {
    if (sent) cuEventDestroy(sent);
    (void)make_current();
    return fail(MEMRA_ERR_DEVICE, cu_error(r, "pipeline copy: event on the sending stream"));
  }
  // 2. The receiver: wait for the sender, copy.
  if (const memra_status st = make_current(); st != MEMRA_OK) {
    cuEventDestroy(sent);
    return st;
  }
  CUcontext to_ctx = nullptr;
  cuCtxGetCurrent(&to_ctx);
  if (!step_ops_.empty())
    if (const memra_status f = flush_recorded(); f != MEMRA_OK) {
      cuEventDestroy(sent);
      return f;
    }
  r = cuStreamWaitEvent(ctx_.stream(), sent, 0);
  cuEventDestroy(sent);  // released once the wait is satisfied
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "pipeline copy: cuStreamWaitEvent"));
  if (from.ctx_.device() == ctx_.device()) {
    r = cuMemcpyDtoDAsync(dst, src, bytes, ctx_.stream());
  } else {
    enable_peer_access(from.ctx_.device(), from_ctx, ctx_.device(), to_ctx);
    r = cuMemcpyPeerAsync(dst, to_ctx, src, from_ctx, bytes, ctx_.stream());
  }
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "pipeline copy (cuMemcpy*Async)"));
  // 3. The sender's later work (say, the next step reusing src) waits for the copy.
  CUevent copied = nullptr;
  r = cuEventCreate(&copied, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = cuEventRecord(copied, ctx_.stream());
  if (r == CUDA_SUCCESS) {
    if (const memra_status st = from.make_current(); st != MEMRA_OK) {
      cuEventDestroy(copied);
      return sender_failed(st);
    }
    r = cuStreamWaitEvent(from.ctx_.stream(), copied, 0);
  }
  if (copied) cuEventDestroy(copied);
  if (const memra_status st = make_current(); st != MEMRA_OK) return st;
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "pipeline copy: event back to the sending stream"));
  return MEMRA_OK;
}

memra_status CudaBackend::prepare_batch(const memra_forward_batch* batch) {
  if (!batch) return fail(MEMRA_ERR_INVALID_ARGUMENT, "prepare_batch: NULL batch");
  auto b = device_batch(batch);
  return b ? MEMRA_OK : fail(b.error());
}

}  // namespace memra::backend::cuda
