// Per-kernel profile of decode steps (MEMRA_CUDA_PROFILE=1, read when the backend opens),
// or of steps with prompt rows (MEMRA_CUDA_PROFILE=prefill): step graphs are turned off and
// every launch of such a step (plugin kernels' too) is bracketed by two CUDA events; at the next step's start (after its synchronize) the spans are
// summed per kernel name, and the backend prints the table when it closes. Eager times
// (no graph, no PDL overlap): the sum per step against the graph step's time is what
// launch gaps and overlap cost. ncu cannot be pointed at the decode steps of a bench
// easily (docs/PERFORMANCE.md), and nsys is not on the GPU machines.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "host/backend/cuda/cu_error.hpp"
#include "host/backend/cuda/cuda_backend.hpp"

namespace memra::backend::cuda {

void CudaBackend::profile_init() {
  const char* v = std::getenv("MEMRA_CUDA_PROFILE");
  profile_ = v && *v && std::strcmp(v, "0") != 0;
  profile_prefill_ = profile_ && std::strcmp(v, "prefill") == 0;
  profile_step_ = !profile_prefill_;
  if (profile_) options_.step_graphs = false;  // eager launches, one span each
}

CUevent CudaBackend::profile_event() {
  if (!profile_events_.empty()) {
    CUevent e = profile_events_.back();
    profile_events_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  return cuEventCreate(&e, CU_EVENT_DEFAULT) == CUDA_SUCCESS ? e : nullptr;
}

memra_status CudaBackend::profile_launch(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args,
                                         CUstream stream) {
  const CUstream s = stream ? stream : ctx_.stream();
  CUevent a = profile_event(), b = profile_event();
  if (a) cuEventRecord(a, s);
  const CUresult r = cuLaunchKernel(k->function, gx, gy, 1, block, 1, 1, shared, s, args, nullptr);
  if (b) cuEventRecord(b, s);
  if (a && b) profile_pending_.push_back({k, a, b});
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + k->name).c_str()));
  return MEMRA_OK;
}

void CudaBackend::profile_collect() {
  if (profile_pending_.empty()) return;
  ++profile_steps_;
  for (const ProfileSpan& s : profile_pending_) {
    float ms = 0.0f;
    if (cuEventSynchronize(s.end) == CUDA_SUCCESS && cuEventElapsedTime(&ms, s.start, s.end) == CUDA_SUCCESS) {
      ProfileTotal& t = profile_totals_[s.kernel->name];
      ++t.count;
      t.ms += ms;
    }
    profile_events_.push_back(s.start);
    profile_events_.push_back(s.end);
  }
  profile_pending_.clear();
}

void CudaBackend::profile_report() {
  profile_collect();
  if (profile_steps_ > 0) {
    std::vector<std::pair<std::string, ProfileTotal>> rows(profile_totals_.begin(), profile_totals_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0;
    int64_t launches = 0;
    for (const auto& [n, t] : rows) total += t.ms, launches += t.count;
    const double steps = static_cast<double>(profile_steps_);
    std::fprintf(stderr, "%s profile (MEMRA_CUDA_PROFILE, eager): %lld steps, %.1f us of kernels in %.1f launches per step\n",
                 profile_prefill_ ? "prefill" : "decode", static_cast<long long>(profile_steps_), 1e3 * total / steps, static_cast<double>(launches) / steps);
    std::fprintf(stderr, "  %-40s %10s %10s %9s %6s\n", "kernel", "launches", "us/step", "us/launch", "share");
    for (const auto& [n, t] : rows)
      std::fprintf(stderr, "  %-40s %10.1f %10.1f %9.2f %5.1f%%\n", n.c_str(), static_cast<double>(t.count) / steps,
                   1e3 * t.ms / steps, 1e3 * t.ms / static_cast<double>(t.count), 100.0 * t.ms / total);
  }
  for (CUevent e : profile_events_) cuEventDestroy(e);
  profile_events_.clear();
}

}  // namespace memra::backend::cuda
