#include "host/backend/cuda/cuda_backend.hpp"
#include "host/backend/moe_ffn_args.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "host/backend/cuda/cu_error.hpp"

namespace memra::backend::cuda {
namespace {

memra_status to_status(ErrorCode c) {
  switch (c) {
    case ErrorCode::invalid_argument: return MEMRA_ERR_INVALID_ARGUMENT;
    case ErrorCode::not_found: return MEMRA_ERR_NOT_FOUND;
    case ErrorCode::unsupported: return MEMRA_ERR_UNSUPPORTED;
    case ErrorCode::io:
    case ErrorCode::corrupt: return MEMRA_ERR_IO;
    default: return MEMRA_ERR_DEVICE;
  }
}

std::string module_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&module_dir), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path().string();
  return ".";
}

std::string default_cache_dir() {
  if (const char* home = std::getenv("MEMRA_HOME"); home && *home) return std::string(home) + "/kernel-cache";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.memra/kernel-cache";
  return "";
}

}  // namespace

CudaBackend::CudaBackend(const BackendOptions& options) : options_(options) {
  kernel_dir_ = !options.kernel_dir.empty() ? options.kernel_dir : module_dir() + "/kernels";
  cache_dir_ = !options.cache_dir.empty() ? options.cache_dir : default_cache_dir();
  sync_each_op_ = options.sync_each_op;
  profile_init();
  fill_ops(ops_, reinterpret_cast<memra_backend_ctx*>(this));
}

CudaBackend::~CudaBackend() {
  if (!ctx_.stream()) return;
  (void)ctx_.make_current();
  (void)ctx_.synchronize();  // nothing to report from a destructor
  pipe_close();
  if (profile_) profile_report();
  release_graph();
  batches_.clear();
  arena_.reset();
  staging_.reset();
  release_slots();
  modules_.reset();
  for (CUdeviceptr p : weight_blobs_) cuMemFree(p);
  for (RopeEntry& r : ropes_) cuMemFree(r.inv_freq);
  if (k_cache_) cuMemFree(k_cache_);
  if (v_cache_) cuMemFree(v_cache_);
  for (CUdeviceptr p : state_cache_)
    if (p) cuMemFree(p);
  for (void* p : host_buffers_) cuMemFreeHost(p);
}

Status CudaBackend::open() {
  MEMRA_TRY(ctx_.open(options_.device));
  modules_ = std::make_unique<KernelModules>(kernel_dir_, ctx_.major(), ctx_.minor(), options_.allow_ptx_jit,
                                             [this](memra_log_level l, const std::string& m) { log(l, m); });
  nvrtc_ = NvrtcCompiler(cache_dir_, arch_name(ctx_.major(), ctx_.minor()));
  registry_ = std::make_unique<KernelRegistry>(ctx_.arch());
  arena_ = std::make_unique<StepArena>(ctx_.stream());
  staging_ = std::make_unique<PinnedStaging>(ctx_.stream());
  // Load one module now so a missing or mismatched kernel build fails at start, not mid-request.
  auto m = modules_->load("norm");
  if (!m) return m.error();
  log(MEMRA_LOG_INFO, "CUDA backend on " + ctx_.name() + " (" + ctx_.arch() + ", " + std::to_string(ctx_.multiprocessors()) +
                          " SMs), kernels from " + kernel_dir_);
  return {};
}

void CudaBackend::log(memra_log_level level, const std::string& message) const {
  if (options_.log) {
    options_.log(options_.log_user, level, message.c_str());
    return;
  }
  if (level >= MEMRA_LOG_WARN) std::fprintf(stderr, "memra cuda backend: %s\n", message.c_str());
}

memra_status CudaBackend::fail(memra_status code, std::string message) {
  last_error_ = std::move(message);
  return code;
}

memra_status CudaBackend::fail(const Error& e) { return fail(to_status(e.code), e.message); }

memra_status CudaBackend::make_current() {
  auto s = ctx_.make_current();
  return s ? MEMRA_OK : fail(s.error());
}

memra_status CudaBackend::device_info(memra_device_info* out) {
  if (!out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "device_info: NULL output");
  // Static storage for the strings: they must outlive the call (host-owned semantics).
  memra_device_info d{};
  d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  d.backend = MEMRA_BACKEND_CUDA;
  d.compute_major = ctx_.major();
  d.compute_minor = ctx_.minor();
  d.multiprocessor_count = ctx_.multiprocessors();
  d.total_memory_bytes = ctx_.total_memory();
  d.arch = ctx_.arch().c_str();
  d.name = ctx_.name().c_str();
  const size_t n = std::min(out->struct_size ? out->struct_size : sizeof d, sizeof d);
  std::memcpy(out, &d, n);
  out->struct_size = n;
  return MEMRA_OK;
}

memra_status CudaBackend::memory_info(uint64_t* free, uint64_t* total) {
  size_t f = 0, t = 0;
  if (const CUresult r = cuMemGetInfo(&f, &t); r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "cuMemGetInfo"));
  *free = f;
  *total = t;
  return MEMRA_OK;
}

memra_status CudaBackend::upload_weights(const memra_weight_set* set) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  if (!set || (set->count && !set->weights)) return fail(MEMRA_ERR_INVALID_ARGUMENT, "upload_weights: no weight set");
  // Every matrix's scheme needs a registered matmul kernel on this device: refused
  // here, at load, with the scheme and arch named, never at the first step.
  for (size_t i = 0; i < set->count; ++i) {
    const memra_weight& stored = set->weights[i];
    if ((stored.ndim != 2 && stored.ndim != 3) || !stored.quant || (stored.ndim == 3 && stored.shape[0] <= 0)) continue;
    // A stacked [n][rows][cols] tensor (moe_ffn's experts): its slices' rows are gathered by the
    // scheme's row gather (ops_moe.cpp), never multiplied by the GEMV, so it sets no activation format.
    const memra_weight w = stored.ndim == 3 ? moe_expert_slice(stored, 0) : stored;
    auto s = scheme(&w);
    if (!s) return fail(MEMRA_ERR_UNSUPPORTED, std::string("weight ") + (w.name ? w.name : "?") + ": " + s.error().message);
    if (stored.ndim == 3) {
      if (!s->dev || s->embedding.empty())
        return fail(MEMRA_ERR_UNSUPPORTED, std::string("weight ") + (w.name ? w.name : "?") + ": " + s->entry->provider +
                                               " registers no row gather (embedding entry) for scheme '" + s->scheme +
                                               "' on this device, which stacked experts need; requantize them");
      continue;
    }
    ActFormat& f = act_format_by_cols_[w.shape[1]];
    if (s->int8) f = ActFormat::int8x32;
    else if (s->bf16s128 && f == ActFormat::none) f = ActFormat::bf16s128;
  }
  // One allocation for the whole set; tensors sharing host memory (tied embeddings) share the copy.
  std::vector<std::pair<const memra_weight*, uint64_t>> plan;
  std::unordered_map<const void*, uint64_t> offsets;
  uint64_t total = 0;
  for (size_t i = 0; i < set->count; ++i) {
    const memra_weight& w = set->weights[i];
    if (!w.data || w.bytes == 0 || offsets.count(w.data)) continue;
    offsets[w.data] = total;
    plan.emplace_back(&w, total);
    total = align_up(total + w.bytes, 256);
  }
  if (total == 0) return MEMRA_OK;
  CUdeviceptr blob = 0;
  CUresult r = cuMemAlloc(&blob, total);
  if (r != CUDA_SUCCESS)
    return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "cuMemAlloc (weights)") + ": the model's " + std::to_string(total >> 20) +
                                             " MiB of weights do not fit in free GPU memory");
  weight_blobs_.push_back(blob);
  // Double-buffered pinned staging: copy chunk i+1 into one half while the DMA reads the other.
  constexpr uint64_t kHalf = 32ull << 20;
  void* pinned = nullptr;
  if ((r = cuMemAllocHost(&pinned, 2 * kHalf)) != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "cuMemAllocHost (upload staging)"));
  CUevent done[2] = {nullptr, nullptr};
  cuEventCreate(&done[0], CU_EVENT_DISABLE_TIMING);
  cuEventCreate(&done[1], CU_EVENT_DISABLE_TIMING);
  bool used[2] = {false, false};
  int half = 0;
  memra_status st = MEMRA_OK;
  for (auto& [w, off] : plan) {
    const auto* src = static_cast<const uint8_t*>(w->data);
    for (uint64_t done_bytes = 0; done_bytes < w->bytes && st == MEMRA_OK; done_bytes += kHalf) {
      const uint64_t n = std::min(kHalf, w->bytes - done_bytes);
      if (used[half] && (r = cuEventSynchronize(done[half])) != CUDA_SUCCESS) {
        st = fail(MEMRA_ERR_DEVICE, cu_error(r, "weight upload"));
        break;
      }
      uint8_t* stage = static_cast<uint8_t*>(pinned) + half * kHalf;
      std::memcpy(stage, src + done_bytes, n);
      if ((r = cuMemcpyHtoDAsync(blob + off + done_bytes, stage, n, ctx_.stream())) != CUDA_SUCCESS) {
        st = fail(MEMRA_ERR_DEVICE, cu_error(r, "cuMemcpyHtoDAsync (weights)"));
        break;
      }
      cuEventRecord(done[half], ctx_.stream());
      used[half] = true;
      half ^= 1;
    }
    if (st != MEMRA_OK) break;
    weights_[w->data] = WeightCopy{blob + off, w->bytes};
  }
  r = cuStreamSynchronize(ctx_.stream());
  if (st == MEMRA_OK && r != CUDA_SUCCESS) st = fail(MEMRA_ERR_DEVICE, cu_error(r, "weight upload"));
  cuEventDestroy(done[0]);
  cuEventDestroy(done[1]);
  cuMemFreeHost(pinned);
  return st;
}

memra_status CudaBackend::allocate_kv(const KvCacheConfig& kv) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  if (kv.layers.empty() || !kv.valid())
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "allocate_kv: bad KV cache geometry");
  for (const KvLayerConfig& l : kv.layers) {
    if (l.kv_heads < 0 || (l.kv_heads > 0 && l.head_dim <= 0)) return fail(MEMRA_ERR_INVALID_ARGUMENT, "allocate_kv: bad KV cache geometry");
    if (l.kv_heads > 0 && kv_element_bytes(l.dtype) == 0)
      return fail(MEMRA_ERR_UNSUPPORTED, "allocate_kv: KV cache dtype " + std::to_string(l.dtype) +
                                             " is not supported (MEMRA_DTYPE_F16, MEMRA_DTYPE_BF16, MEMRA_DTYPE_F8_E4M3 or MEMRA_DTYPE_F32)");
    if (l.kv_heads > 0 && l.dtype == MEMRA_DTYPE_F8_E4M3 && l.head_dim % 16 != 0)
      return fail(MEMRA_ERR_UNSUPPORTED, "allocate_kv: an fp8 KV cache needs head_dim a multiple of 16 (got " +
                                             std::to_string(l.head_dim) + ")");
  }
  if (k_cache_) cuMemFree(k_cache_);
  if (v_cache_) cuMemFree(v_cache_);
  k_cache_ = v_cache_ = 0;
  kv_ = kv;
  const uint64_t bytes = kv.bytes();
  if (bytes == 0) return MEMRA_OK;  // no layer keeps KV (a recurrent-only model)
  CUresult r = cuMemAlloc(&k_cache_, bytes);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&v_cache_, bytes);
  if (r != CUDA_SUCCESS)
    return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "cuMemAlloc (KV cache)") + ": " + std::to_string(2 * bytes >> 20) +
                                             " MiB of KV cache do not fit; lower the context or the sequence count");
  // Zeroed like the CPU cache, so reads of never-written slots are deterministic.
  cuMemsetD8Async(k_cache_, 0, bytes, ctx_.stream());
  cuMemsetD8Async(v_cache_, 0, bytes, ctx_.stream());
  return synchronize();
}

memra_status CudaBackend::begin_step() {
  last_error_.clear();
  // A step that ended without logits_output (no logits wanted) still has to run.
  const memra_status pending = flush_recorded();
  const memra_status slot = switch_slot(0);  // a plain step uses slot 0's scratch
  auto s = ctx_.synchronize();
  slots_[0].pending.clear();
  slots_[1].pending.clear();
  slots_[0].done_pending = slots_[1].done_pending = false;
  async_logits_ = false;
  reset_step_scratch();
  if (pending != MEMRA_OK) return pending;
  if (slot != MEMRA_OK) return slot;
  return s ? MEMRA_OK : fail(s.error());
}

void CudaBackend::reset_step_scratch() {
  if (profile_) {
    profile_collect();  // the step before was synchronized (begin_step, slots)
    profile_step_ = !profile_prefill_;  // a decode step until its batch shows prompt rows
  }
  batches_.clear();
  pending_rows_.clear();
  act_rows_ = {};  // its buffers were step scratch
  arena_->reset();
  staging_->reset();
  // Step graphs unless turned off (eager launches, for debugging).
  graph_enabled_ = options_.step_graphs;
  recording_ = graph_enabled_ && !sync_each_op_;
  step_ops_.clear();
  gemv_merge_.valid = false;
}

memra_status CudaBackend::copy_kv_block(int32_t pool, int32_t from, int32_t to) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  if (pool < 0 || pool >= kv_.num_pools() || from < 0 || to < 0 || from >= kv_.pool_blocks[static_cast<size_t>(pool)] ||
      to >= kv_.pool_blocks[static_cast<size_t>(pool)])
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "copy_kv_block: pool or block out of range");
  if (!k_cache_) return MEMRA_OK;  // no attention layer here (a pipeline stage of recurrent layers): no KV to copy
  for (size_t l = 0; l < kv_.layers.size(); ++l) {
    const uint64_t base = kv_.layer_offset(l), block = kv_.block_bytes(l);
    if (block == 0 || kv_.layers[l].pool != pool) continue;
    for (CUdeviceptr c : {k_cache_, v_cache_}) {
      const CUresult r = cuMemcpyDtoDAsync(c + base + to * block, c + base + from * block, block, ctx_.stream());
      if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "copy_kv_block"));
    }
  }
  return MEMRA_OK;
}

memra_status CudaBackend::memory_alloc(memra_memory_location location, uint64_t bytes, memra_buffer* out) {
  if (!out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "memory_alloc: NULL output");
  *out = memra_buffer{};
  out->struct_size = MEMRA_BUFFER_STRUCT_SIZE;
  out->location = location;
  out->bytes = bytes;
  CUresult r = CUDA_SUCCESS;
  if (location == MEMRA_MEMORY_DEVICE) {
    CUdeviceptr p = 0;
    r = cuMemAlloc(&p, std::max<uint64_t>(bytes, 1));
    out->ptr = reinterpret_cast<void*>(p);
  } else if (location == MEMRA_MEMORY_HOST_PINNED) {
    r = cuMemAllocHost(&out->ptr, std::max<uint64_t>(bytes, 1));
  } else {
    out->ptr = std::malloc(std::max<uint64_t>(bytes, 1));
    if (!out->ptr) return fail(MEMRA_ERR_OUT_OF_MEMORY, "memory_alloc: host allocation failed");
  }
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_OUT_OF_MEMORY, cu_error(r, "memory_alloc"));
  return MEMRA_OK;
}

void CudaBackend::memory_free(memra_buffer* b) {
  if (!b || !b->ptr) return;
  (void)flush_recorded();  // a failure shows at the step's next wait
  if (b->location == MEMRA_MEMORY_DEVICE) {
    cuStreamSynchronize(ctx_.stream());
    cuMemFree(reinterpret_cast<CUdeviceptr>(b->ptr));
  } else if (b->location == MEMRA_MEMORY_HOST_PINNED) {
    cuMemFreeHost(b->ptr);
  } else {
    std::free(b->ptr);
  }
  b->ptr = nullptr;
}

memra_status CudaBackend::copy_to_device(void* dst, const void* src, uint64_t bytes) {
  ++write_epoch_;
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  const CUresult r = cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "copy_to_device"));
  return synchronize();  // src is pageable and may be freed right after
}

memra_status CudaBackend::copy_to_host(void* dst, const void* src, uint64_t bytes) {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  const CUresult r = cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, "copy_to_host"));
  return synchronize();
}

memra_status CudaBackend::synchronize() {
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;
  auto s = ctx_.synchronize();
  if (!s) return fail(s.error());
  deliver_rows();
  return MEMRA_OK;
}

memra_status CudaBackend::kernel_module_load(const char* name, memra_kernel_module** out) {
  if (!name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_module_load: NULL argument");
  auto m = modules_->load(name);
  if (!m) return fail(m.error());
  *out = reinterpret_cast<memra_kernel_module*>(*m);
  return MEMRA_OK;
}

memra_status CudaBackend::kernel_module_compile(const memra_nvrtc_request* req, memra_kernel_module** out) {
  if (!MEMRA_STRUCT_HAS(req, memra_nvrtc_request, num_options) || !req->source || !out)
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_module_compile: bad request");
  NvrtcRequest r;
  r.name = req->name ? req->name : "kernel";
  r.source = req->source;
  for (size_t i = 0; i < req->num_options; ++i) r.options.emplace_back(req->options[i]);
  auto m = modules_->compile(nvrtc_, r);
  if (!m) return fail(m.error());
  *out = reinterpret_cast<memra_kernel_module*>(*m);
  return MEMRA_OK;
}

memra_status CudaBackend::kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out) {
  if (!module || !name || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_get: NULL argument");
  auto k = modules_->get(reinterpret_cast<Module*>(module), name);
  if (!k) return fail(k.error());
  *out = reinterpret_cast<memra_kernel*>(*k);
  return MEMRA_OK;
}

memra_status CudaBackend::allow_dynamic_smem(Kernel* k, uint64_t bytes) {
  if (bytes <= k->dynamic_smem_limit) return MEMRA_OK;
  // The opt-in limit covers the kernel's static shared memory too.
  int optin = 0, static_bytes = 0;
  CUresult r = cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, ctx_.device());
  if (r == CUDA_SUCCESS) r = cuFuncGetAttribute(&static_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->function);
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, ("shared memory limits of " + k->name).c_str()));
  const int dynamic_max = optin - static_bytes;
  if (bytes > static_cast<uint64_t>(std::max(dynamic_max, 0)))
    return fail(MEMRA_ERR_UNSUPPORTED, k->name + " needs " + std::to_string(bytes) + " bytes of dynamic shared memory per block; the device allows " +
                                           std::to_string(dynamic_max));
  r = cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_max);
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, ("cuFuncSetAttribute (shared memory of " + k->name + ")").c_str()));
  k->dynamic_smem_limit = static_cast<uint32_t>(dynamic_max);
  return MEMRA_OK;
}

// A launch through the kernel services (plugins, tools). With argument sizes that match
// the kernel's parameter layout it is recorded like the backend's own launches, so a
// decode step that contains it still replays as one graph; without them it ends the
// step's recording and runs eagerly.
memra_status CudaBackend::kernel_launch(memra_kernel* kernel, const memra_launch_config* c, void** args) {
  if (!kernel || !MEMRA_STRUCT_HAS(c, memra_launch_config, stream))
    return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_launch: bad kernel or launch config");
  auto* k = reinterpret_cast<Kernel*>(kernel);
  if (const memra_status sm = allow_dynamic_smem(k, c->shared_bytes); sm != MEMRA_OK) return sm;
  ++write_epoch_;
  const bool sized = MEMRA_STRUCT_HAS(c, memra_launch_config, arg_sizes) && c->num_args > 0;
  if (sized && (!c->arg_sizes || !args)) return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_launch " + k->name + ": num_args without arg_sizes or args");
  const auto& layout = param_layout(k);
  if (sized && !layout.empty()) {
    bool same = layout.size() == c->num_args;
    for (size_t i = 0; same && i < layout.size(); ++i) same = layout[i].second == c->arg_sizes[i];
    if (!same) {
      std::string want, got;
      for (const auto& p : layout) want += (want.empty() ? "" : ",") + std::to_string(p.second);
      for (uint32_t i = 0; i < c->num_args; ++i) got += (got.empty() ? "" : ",") + std::to_string(c->arg_sizes[i]);
      return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_launch " + k->name + ": the kernel takes parameters of " + want +
                                                  " bytes, the launch passed " + got);
    }
  }
  const bool own_stream = !c->stream || static_cast<CUstream>(c->stream) == ctx_.stream();
  if (recording_ && sized && own_stream && !layout.empty()) {
    StepOp op;
    op.kernel = k;
    op.plugin = true;
    op.gx = c->grid[0], op.gy = c->grid[1], op.gz = c->grid[2];
    op.block = c->block[0], op.by = c->block[1], op.bz = c->block[2];
    op.shared = c->shared_bytes;
    op.args.assign(layout.back().first + layout.back().second, 0);
    for (size_t i = 0; i < layout.size(); ++i) {
      std::memcpy(op.args.data() + layout[i].first, args[i], layout[i].second);
      op.offsets.push_back(layout[i].first);
    }
    step_ops_.push_back(std::move(op));
    return MEMRA_OK;
  }
  if (const memra_status f = flush_recorded(); f != MEMRA_OK) return f;  // unsized or foreign stream: eager from here
  CUstream s = own_stream ? ctx_.stream() : static_cast<CUstream>(c->stream);
  CUevent pa = nullptr, pb = nullptr;  // MEMRA_CUDA_PROFILE: the launch's span
  if (profile_ && profile_step_ && own_stream && (pa = profile_event()) && (pb = profile_event())) cuEventRecord(pa, s);
  const CUresult r = cuLaunchKernel(k->function, c->grid[0], c->grid[1], c->grid[2], c->block[0], c->block[1], c->block[2],
                                    c->shared_bytes, s, args, nullptr);
  if (pa && pb) {
    cuEventRecord(pb, s);
    profile_pending_.push_back({k, pa, pb});
  } else {
    if (pa) profile_events_.push_back(pa);
    if (pb) profile_events_.push_back(pb);
  }
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + k->name).c_str()));
  ++plugin_launches_eager_;
  return after_op(k->name.c_str());
}

memra_status CudaBackend::kernel_module_load_file(const char* path, memra_kernel_module** out) {
  if (!path || !out) return fail(MEMRA_ERR_INVALID_ARGUMENT, "kernel_module_load_file: NULL argument");
  auto m = modules_->load_file(path);
  if (!m) return fail(m.error());
  *out = reinterpret_cast<memra_kernel_module*>(*m);
  return MEMRA_OK;
}

memra_status CudaBackend::register_plugin_kernels(const char* plugin_name, memra_plugin_ctx* ctx, RegisterKernelsFn fn,
                                                  int32_t* added, const void* services) {
  if (!plugin_name || !fn) return fail(MEMRA_ERR_INVALID_ARGUMENT, "register_plugin_kernels: NULL plugin name or function");
  memra_device_info device{};
  device.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  if (const memra_status st = device_info(&device); st != MEMRA_OK) return st;
  KernelRegistry::PluginRegistrar r;
  registry_->make_registrar(r, &device, plugin_name, ctx, services);
  last_error_.clear();
  const memra_status st = fn(ctx, &r.registrar);
  if (added) *added = 0;
  // A refused descriptor fails the whole registration, even if the plugin went on.
  if (!r.last_error.empty()) return fail(st != MEMRA_OK ? st : MEMRA_ERR_INVALID_ARGUMENT, r.last_error);
  if (st != MEMRA_OK) return fail(st, last_error_.empty() ? std::string("register_kernels failed") : last_error_);
  const int32_t n = static_cast<int32_t>(r.staged.size());
  if (auto c = r.commit(); !c) return fail(c.error());
  if (added) *added = n;
  return MEMRA_OK;
}

BackendStats CudaBackend::stats() const {
  BackendStats s;
  s.graph_replays = graph_replays_;
  s.graph_captures = graph_captures_;
  s.plugin_matmuls = plugin_matmuls_;
  s.plugin_launches_replayed = plugin_launches_replayed_;
  s.plugin_launches_captured = plugin_launches_captured_;
  s.plugin_launches_eager = plugin_launches_eager_;
  s.fused_act_quantisations = fused_act_quantisations_;
  s.merged_gemv_launches = merged_gemv_launches_;
  return s;
}

memra_status CudaBackend::launch_raw(Kernel* k, unsigned gx, unsigned gy, unsigned block, unsigned shared, void** args) {
  ++write_epoch_;
  if (recording_) return record_launch(k, gx, gy, block, shared, args);
  if (profile_ && profile_step_) return profile_launch(k, gx, gy, block, shared, args);
  const CUresult r = cuLaunchKernel(k->function, gx, gy, 1, block, 1, 1, shared, ctx_.stream(), args, nullptr);
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, ("launch " + k->name).c_str()));
  return MEMRA_OK;
}

memra_status CudaBackend::after_op(const char* what) {
  if (!sync_each_op_) return MEMRA_OK;
  const CUresult r = cuStreamSynchronize(ctx_.stream());
  if (r != CUDA_SUCCESS) return fail(MEMRA_ERR_DEVICE, cu_error(r, what));
  return MEMRA_OK;
}

CUdeviceptr CudaBackend::resolve(const memra_weight* w, memra_status* st) {
  if (!w || !w->data) {
    *st = fail(MEMRA_ERR_INVALID_ARGUMENT, "weight has no data");
    return 0;
  }
  auto it = weights_.find(w->data);
  if (it == weights_.end()) {
    *st = fail(MEMRA_ERR_NOT_FOUND, std::string("weight ") + (w->name ? w->name : "?") + " was not uploaded to the GPU (upload_weights before model_create)");
    return 0;
  }
  *st = MEMRA_OK;
  return it->second.ptr;
}

Result<const DeviceBatch*> CudaBackend::device_batch(const memra_forward_batch* b) {
  for (const auto& d : batches_)
    if (d->source == b && d->source_ids == b->token_ids && d->num_tokens == b->num_tokens) return d.get();
  if (!MEMRA_STRUCT_HAS(b, memra_forward_batch, logits) || b->num_tokens <= 0 || !b->token_ids || !b->positions ||
      !b->seq_index || !b->block_tables)
    return make_error(ErrorCode::invalid_argument, "forward batch is incomplete");
  const uint64_t t = static_cast<uint64_t>(b->num_tokens);
  // Every KV pool's tables (ABI 2.5; an older batch carries pool 0's only).
  const int32_t pools = MEMRA_STRUCT_HAS(b, memra_forward_batch, num_kv_pools) && b->num_kv_pools > 0 ? b->num_kv_pools : 1;
  const uint64_t tables = static_cast<uint64_t>(pools) * static_cast<uint64_t>(b->num_seqs) * static_cast<uint64_t>(b->max_blocks_per_seq);
  const uint64_t logits = b->logits_rows ? static_cast<uint64_t>(std::max(0, b->num_logits)) : 0;
  const uint64_t n = 4 * t + tables + logits;
  if (MEMRA_STRUCT_HAS(b, memra_forward_batch, prompt_tokens) && b->prompt_tokens &&
      std::any_of(b->prompt_tokens, b->prompt_tokens + b->num_tokens, [](uint8_t f) { return f != 0; })) {
    if (profile_ && !profile_prefill_) {  // not a decode step: its spans so far are dropped
      for (const ProfileSpan& s : profile_pending_) profile_events_.push_back(s.start), profile_events_.push_back(s.end);
      profile_pending_.clear();
    }
    profile_step_ = profile_prefill_;
  }
  // Steps that read prompt tokens run eagerly: their shapes change from step to step,
  // so a graph would be captured for one use. Decode steps repeat and replay.
  if (recording_ && MEMRA_STRUCT_HAS(b, memra_forward_batch, prompt_tokens) && b->prompt_tokens &&
      std::any_of(b->prompt_tokens, b->prompt_tokens + b->num_tokens, [](uint8_t f) { return f != 0; }))
    if (flush_recorded() != MEMRA_OK) return make_error(ErrorCode::internal, last_error_);
  // Recorded copies read the staging memory when the step runs: no wrap before that.
  if (recording_ && !staging_->fits(n * 4))
    if (flush_recorded() != MEMRA_OK) return make_error(ErrorCode::internal, last_error_);
  auto host = staging_->alloc(n * 4);
  if (!host) return host.error();
  auto* h = static_cast<int32_t*>(*host);
  std::memcpy(h, b->token_ids, t * 4);
  std::memcpy(h + t, b->positions, t * 4);
  std::memcpy(h + 2 * t, b->seq_index, t * 4);
  {
    std::vector<int32_t> first(static_cast<size_t>(std::max(0, b->num_seqs)), INT32_MAX);
    for (uint64_t i = 0; i < t; ++i) {
      const int32_t s = b->seq_index[i];
      if (s >= 0 && s < b->num_seqs) first[static_cast<size_t>(s)] = std::min(first[static_cast<size_t>(s)], b->positions[i]);
    }
    for (uint64_t i = 0; i < t; ++i) {
      const int32_t s = b->seq_index[i];
      h[3 * t + i] = s >= 0 && s < b->num_seqs ? first[static_cast<size_t>(s)] : 0;  // (attention refuses the row)
    }
  }
  if (tables) std::memcpy(h + 4 * t, b->block_tables, tables * 4);
  if (logits) std::memcpy(h + 4 * t + tables, b->logits_rows, logits * 4);
  auto dev = arena_->alloc(n * 4);
  if (!dev) return dev.error();
  if (recording_) {
    (void)record_copy(*dev, h, n * 4, true);
  } else {
    const CUresult r = cuMemcpyHtoDAsync(*dev, h, n * 4, ctx_.stream());
    if (r != CUDA_SUCCESS) return make_error(ErrorCode::internal, cu_error(r, "batch upload"));
  }
  auto d = std::make_unique<DeviceBatch>();
  d->source = b;
  d->source_ids = b->token_ids;
  d->num_tokens = b->num_tokens;
  d->ids = *dev;
  d->positions = *dev + t * 4;
  d->seq_index = *dev + 2 * t * 4;
  d->fresh_from = *dev + 3 * t * 4;
  d->block_tables = *dev + 4 * t * 4;
  d->logits_rows = *dev + (4 * t + tables) * 4;
  batches_.push_back(std::move(d));
  return batches_.back().get();
}

}  // namespace memra::backend::cuda
