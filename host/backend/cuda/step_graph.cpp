// Step graphs of the CUDA backend (see CudaBackend::StepOp): record a step's launches
// and copies, then replay the previous step's graph when the records are identical
// or capture a new one. Removes the per-launch gaps of a decode step (~1 ms of ~400
// launches) without changing any kernel or argument, so results are bitwise eager.
#include <algorithm>
#include <cstring>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {

const std::vector<std::pair<uint32_t, uint32_t>>& CudaBackend::param_layout(Kernel* k) {
  auto it = param_layouts_.find(k);
  if (it == param_layouts_.end()) {
    // The parameter layout from the driver, once per kernel.
    std::vector<std::pair<uint32_t, uint32_t>> layout;
    for (size_t i = 0;; ++i) {
      size_t off = 0, size = 0;
      if (cuFuncGetParamInfo(k->function, i, &off, &size) != CUDA_SUCCESS) break;
      layout.emplace_back(static_cast<uint32_t>(off), static_cast<uint32_t>(size));
    }
    it = param_layouts_.emplace(k, std::move(layout)).first;
  }
  return it->second;
}

memra_status CudaBackend::record_launch(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args,
                                        bool plugin) {
  const auto& layout = param_layout(k);
  if (layout.empty()) {
    // No layout (a kernel without parameters, or a driver without the query): eager.
    const memra_status st = flush_recorded();
    if (st != MEMRA_OK) return st;
    const CUresult r = cuLaunchKernel(k->function, gx, gy, 1, block, 1, 1, shared, ctx_.stream(), args, nullptr);
    if (plugin) ++plugin_launches_eager_;
    return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + k->name).c_str()));
  }
  StepOp op;
  op.kernel = k;
  op.plugin = plugin;
  op.gx = gx;
  op.gy = gy;
  op.block = block;
  op.shared = shared;
  const auto& [last_off, last_size] = layout.back();
  op.args.assign(last_off + last_size, 0);
  for (size_t i = 0; i < layout.size(); ++i) {
    const auto& [off, size] = layout[i];
    std::memcpy(op.args.data() + off, args[i], size);
    op.offsets.push_back(off);
  }
  step_ops_.push_back(std::move(op));
  return MEMRA_OK;
}

memra_status CudaBackend::record_copy(CUdeviceptr device, void* host, uint64_t bytes, bool to_device) {
  if (to_device) ++write_epoch_;
  StepOp op;
  op.device = device;
  op.host = host;
  op.bytes = bytes;
  op.to_device = to_device;
  step_ops_.push_back(std::move(op));
  return MEMRA_OK;
}

memra_status CudaBackend::issue(const StepOp& op, bool after_kernel) {
  if (!op.kernel) {
    const CUresult r = op.to_device ? cuMemcpyHtoDAsync(op.device, op.host, op.bytes, ctx_.stream())
                                    : cuMemcpyDtoHAsync(op.host, op.device, op.bytes, ctx_.stream());
    return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, "step copy"));
  }
  std::vector<void*> argv(op.offsets.size());
  for (size_t i = 0; i < argv.size(); ++i) argv[i] = const_cast<uint8_t*>(op.args.data()) + op.offsets[i];
  if (after_kernel && op.kernel->pdl && !op.plugin && options_.programmatic_launch) {
    // Programmatic dependent launch: the kernel may be scheduled while the previous one
    // drains; it waits (griddepcontrol.wait) before reading or writing anything another
    // kernel touches, so the results are the eager ones. Only after a kernel (a copy
    // keeps the full dependency).
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = op.gx, cfg.gridDimY = op.gy, cfg.gridDimZ = op.gz;
    cfg.blockDimX = op.block, cfg.blockDimY = op.by, cfg.blockDimZ = op.bz;
    cfg.sharedMemBytes = op.shared;
    cfg.hStream = ctx_.stream();
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    const CUresult r = cuLaunchKernelEx(&cfg, op.kernel->function, argv.data(), nullptr);
    return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch (PDL) " + op.kernel->name).c_str()));
  }
  const CUresult r = cuLaunchKernel(op.kernel->function, op.gx, op.gy, op.gz, op.block, op.by, op.bz, op.shared, ctx_.stream(),
                                    argv.data(), nullptr);
  return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + op.kernel->name).c_str()));
}

memra_status CudaBackend::flush_recorded() {
  if (!recording_) return MEMRA_OK;
  recording_ = false;
  gemv_merge_.valid = false;
  std::vector<StepOp> ops;
  ops.swap(step_ops_);
  const StepOp* prev = nullptr;
  for (const StepOp& op : ops) {
    if (const memra_status st = issue(op, prev && prev->kernel); st != MEMRA_OK) return st;
    if (op.plugin) ++plugin_launches_eager_;
    prev = &op;
  }
  return MEMRA_OK;
}

void CudaBackend::release_graph() {
  for (CachedGraph& g : graphs_)
    if (g.exec) cuGraphExecDestroy(g.exec);
  graphs_.clear();
}

memra_status CudaBackend::run_step_graph() {
  recording_ = false;
  gemv_merge_.valid = false;
  std::vector<StepOp> ops;
  ops.swap(step_ops_);
  const CUstream s = ctx_.stream();
  const auto plugin_ops = std::count_if(ops.begin(), ops.end(), [](const StepOp& op) { return op.plugin; });
  CachedGraph* hit = nullptr;
  for (CachedGraph& g : graphs_)
    if (g.ops == ops) hit = &g;
  if (hit) {
    ++graph_replays_;
    plugin_launches_replayed_ += plugin_ops;
  } else {
    CUresult r = cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "cuStreamBeginCapture (step graph)"));
    memra_status st = MEMRA_OK;
    for (size_t i = 0; i < ops.size(); ++i)
      if ((st = issue(ops[i], i > 0 && ops[i - 1].kernel)) != MEMRA_OK) break;
    CUgraph g = nullptr;
    r = cuStreamEndCapture(s, &g);
    if (st != MEMRA_OK || r != CUDA_SUCCESS) {
      if (g) cuGraphDestroy(g);
      release_graph();
      return st != MEMRA_OK ? st : fail(MEMRA_ERR_DEVICE, cu_error(r, "cuStreamEndCapture (step graph)"));
    }
    // Same topology as a kept graph (a decode step whose attention grew a chunk, say):
    // update that one in place.
    auto topology = [](const StepOp& x, const StepOp& y) {
      return x.kernel == y.kernel && (x.kernel || x.to_device == y.to_device);
    };
    for (CachedGraph& c : graphs_) {
      if (c.ops.size() != ops.size() || !std::equal(ops.begin(), ops.end(), c.ops.begin(), topology)) continue;
      CUgraphExecUpdateResultInfo info{};
      if (cuGraphExecUpdate(c.exec, g, &info) == CUDA_SUCCESS) hit = &c;
      break;
    }
    if (!hit) {
      if (graphs_.size() >= kCachedGraphs) {
        auto lru = std::min_element(graphs_.begin(), graphs_.end(), [](const CachedGraph& x, const CachedGraph& y) { return x.used < y.used; });
        cuGraphExecDestroy(lru->exec);
        graphs_.erase(lru);
      }
      CachedGraph fresh;
      r = cuGraphInstantiate(&fresh.exec, g, 0);
      if (r != CUDA_SUCCESS) {
        cuGraphDestroy(g);
        release_graph();
        return fail(MEMRA_ERR_DEVICE, cu_error(r, "cuGraphInstantiate (step graph)"));
      }
      graphs_.push_back(std::move(fresh));
      hit = &graphs_.back();
    }
    cuGraphDestroy(g);
    hit->ops = std::move(ops);
    ++graph_captures_;
    plugin_launches_captured_ += plugin_ops;
  }
  hit->used = ++graph_clock_;
  const CUresult r = cuGraphLaunch(hit->exec, s);
  return r == CUDA_SUCCESS ? MEMRA_OK : fail(MEMRA_ERR_DEVICE, cu_error(r, "cuGraphLaunch (step graph)"));
}

}  // namespace memra::backend::cuda
