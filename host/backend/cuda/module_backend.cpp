// The CUDA module's backend::Backend: a CudaBackend behind the engine's interface and
// the kernel services plugin kernels load and launch through. Every call makes the
// backend's context current and catches everything; failures come back as Status
// carrying the backend's last error.
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "core/plugin_host/kernel_services.hpp"
#include "host/backend/cuda/cuda_backend.hpp"
#include "host/backend/cuda/module_entry.hpp"

namespace memra::backend::cuda {
namespace {

ErrorCode to_code(memra_status st) {
  switch (st) {
    case MEMRA_ERR_INVALID_ARGUMENT: return ErrorCode::invalid_argument;
    case MEMRA_ERR_NOT_FOUND: return ErrorCode::not_found;
    case MEMRA_ERR_UNSUPPORTED: return ErrorCode::unsupported;
    case MEMRA_ERR_IO: return ErrorCode::io;
    default: return ErrorCode::internal;
  }
}

class ModuleBackend final : public Backend, public plugins::KernelServices {
 public:
  explicit ModuleBackend(const BackendOptions& o) : impl_(o), device_(o.device), device_sampling_(o.device_sampling) {}
  Status open() { return impl_.open(); }

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  memra_device_info device_info() const override {
    memra_device_info d{};
    d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
    (void)guarded([&](CudaBackend* b) { return b->device_info(&d); });
    return d;
  }
  MemoryInfo memory_info() const override {
    MemoryInfo m;
    if (guarded([&](CudaBackend* b) { return b->memory_info(&m.free, &m.total); }) != MEMRA_OK) return {};
    m.device = true;
    return m;
  }
  const memra_backend_ops* ops() const override { return impl_.ops(); }
  std::string last_error() const override { return impl_.last_error(); }

  Status register_kernels(const std::string& plugin, memra_plugin_ctx* ctx, RegisterKernelsFn fn, int32_t* added) override {
    return call("", [&](CudaBackend* b) { return b->register_plugin_kernels(plugin.c_str(), ctx, fn, added,
                                                                          static_cast<const plugins::KernelServices*>(this)); });
  }
  plugins::KernelServices* kernel_services() override { return this; }
  Status register_ops(std::span<const ops::PluginOp> ops, std::vector<std::string>* refused) override {
    return call("preparing the plugin's ops", [&](CudaBackend* b) { return b->register_plugin_ops(ops, refused); });
  }
  Status upload_weights(const memra_weight_set& weights) override {
    return call("uploading the weights to the GPU", [&](CudaBackend* b) { return b->upload_weights(&weights); });
  }
  Status allocate_state(const StateConfig& state) override {
    MEMRA_TRY(call("allocating the KV cache", [&](CudaBackend* b) { return b->allocate_kv(state.kv); }));
    return call("allocating the recurrent state", [&](CudaBackend* b) { return b->allocate_state(state.recurrent); });
  }

  Status begin_step(int32_t slot) override {
    if (slot < 0) return call("CUDA step", [](CudaBackend* b) { return b->begin_step(); });
    return call("CUDA step (slot " + std::to_string(slot) + ")", [&](CudaBackend* b) { return b->begin_step_slot(slot); });
  }
  Status wait_logits(int32_t slot) override {
    if (slot < 0) return {};
    return call("CUDA step logits (slot " + std::to_string(slot) + ")", [&](CudaBackend* b) { return b->wait_logits(slot); });
  }
  bool defers_slot_logits() const override { return true; }
  Status prepare_batch(const memra_forward_batch& batch) override {
    return call("uploading the step's batch", [&](CudaBackend* b) { return b->prepare_batch(&batch); });
  }

  Status copy_kv_block(int32_t pool, int32_t from, int32_t to) override {
    return call("copying a KV block", [&](CudaBackend* b) { return b->copy_kv_block(pool, from, to); });
  }
  Status copy_state_slot(int32_t from, int32_t to) override {
    return call("copying a recurrent-state slot", [&](CudaBackend* b) { return b->copy_state_slot(from, to); });
  }
  Status reset_state_slot(int32_t slot) override {
    return call("zeroing a recurrent-state slot", [&](CudaBackend* b) { return b->reset_state_slot(slot); });
  }

  bool samples_on_device() const override { return device_sampling_; }
  Status sample_rows(const SampleRequest& request, int32_t* tokens) override {
    return call("sampling on the GPU", [&](CudaBackend* b) { return b->sample_rows(request, tokens); });
  }
  Status logits_rows_to_host(std::span<const int32_t> rows, float* dst) override {
    return call("copying logits rows from the GPU", [&](CudaBackend* b) {
      return b->logits_rows_to_host(rows.data(), static_cast<int32_t>(rows.size()), dst);
    });
  }

  Status copy_from(Backend& from, void* dst, const void* src, uint64_t bytes) override {
    if (auto* peer = dynamic_cast<ModuleBackend*>(&from))
      return call("pipeline hand-off copy", [&](CudaBackend* b) {
        return b->copy_from_backend(peer->impl_, reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes);
      });
    // Another kind of backend keeps its tensors in host memory: a synchronous upload.
    return copy_to_device(dst, src, bytes);
  }
  Status copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    return call("copy to the host", [&](CudaBackend* b) { return b->copy_to_host(dst, src, bytes); });
  }
  Status copy_to_device(void* dst, const void* src, uint64_t bytes) override {
    return call("copy to the GPU", [&](CudaBackend* b) { return b->copy_to_device(dst, src, bytes); });
  }
  Result<memra_buffer> memory_alloc(memra_memory_location location, uint64_t bytes) override {
    memra_buffer out{};
    MEMRA_TRY(call("memory_alloc", [&](CudaBackend* b) { return b->memory_alloc(location, bytes, &out); }));
    return out;
  }
  void memory_free(memra_buffer& buffer) override {
    (void)guarded([&](CudaBackend* b) {
      b->memory_free(&buffer);
      return MEMRA_OK;
    });
  }
  Status synchronize() override { return call("synchronize", [](CudaBackend* b) { return b->synchronize(); }); }
  BackendStats stats() const override {
    BackendStats s = impl_.stats();
    s.nvrtc_cache_hits = nvrtc_cache_hits_;
    return s;
  }

  // plugins::KernelServices
  memra_status module_load(const std::string& plugin_dir, const char* name, memra_kernel_module** out,
                           std::string* error) override {
    // The plugin's own fatbin first (an out-of-tree plugin ships it beside its .so).
    std::error_code ec;
    const std::filesystem::path own = std::filesystem::path(plugin_dir) / (std::string(name ? name : "") + ".fatbin");
    const bool has_own = !plugin_dir.empty() && name && std::filesystem::exists(own, ec);
    return service(error, [&](CudaBackend* b) {
      return has_own ? b->kernel_module_load_file(own.c_str(), out) : b->kernel_module_load(name, out);
    });
  }
  memra_status module_compile(const memra_nvrtc_request* request, memra_kernel_module** out, std::string* error) override {
    const memra_status st = service(error, [&](CudaBackend* b) { return b->kernel_module_compile(request, out); });
    if (st == MEMRA_OK && impl_.nvrtc_last_cache_hit()) ++nvrtc_cache_hits_;
    return st;
  }
  memra_status kernel_get(memra_kernel_module* module, const char* name, memra_kernel** out, std::string* error) override {
    return service(error, [&](CudaBackend* b) { return b->kernel_get(module, name, out); });
  }
  memra_status kernel_launch(memra_kernel* kernel, const memra_launch_config* config, void** args, std::string* error) override {
    return service(error, [&](CudaBackend* b) { return b->kernel_launch(kernel, config, args); });
  }

 private:
  template <class F>
  memra_status guarded(F&& f) const {
    auto* b = const_cast<CudaBackend*>(&impl_);
    try {
      if (const memra_status st = b->make_current(); st != MEMRA_OK) return st;
      return f(b);
    } catch (const std::exception& e) {
      return b->fail(MEMRA_ERR_INTERNAL, std::string("CUDA backend: ") + e.what());
    } catch (...) {
      return b->fail(MEMRA_ERR_INTERNAL, "CUDA backend: unknown exception");
    }
  }
  // `what: last error`, or the last error alone when what is empty.
  template <class F>
  Status call(const std::string& what, F&& f) {
    const memra_status st = guarded(f);
    if (st == MEMRA_OK) return {};
    return make_error(to_code(st), what.empty() ? impl_.last_error() : what + ": " + impl_.last_error());
  }
  template <class F>
  memra_status service(std::string* error, F&& f) {
    const memra_status st = guarded(f);
    if (st != MEMRA_OK && error) *error = impl_.last_error();
    return st;
  }

  CudaBackend impl_;
  int device_;
  bool device_sampling_;
  int64_t nvrtc_cache_hits_ = 0;
};

}  // namespace
}  // namespace memra::backend::cuda

MEMRA_EXPORT uint32_t memra_cuda_backend_interface_version() { return memra::backend::kBackendInterfaceVersion; }

MEMRA_EXPORT memra::backend::Backend* memra_cuda_backend_open(const memra::backend::BackendOptions* options,
                                                                         std::string* error, int* code) {
  using memra::backend::cuda::ModuleBackend;
  try {
    auto b = std::make_unique<ModuleBackend>(*options);
    if (auto st = b->open(); !st) {
      *error = st.error().message;
      *code = static_cast<int>(st.error().code == memra::ErrorCode::unsupported ? memra::ErrorCode::unsupported
                                                                                  : memra::ErrorCode::internal);
      return nullptr;
    }
    return b.release();
  } catch (const std::exception& e) {
    *error = std::string("CUDA backend open: ") + e.what();
  } catch (...) {
    *error = "CUDA backend open: unknown exception";
  }
  *code = static_cast<int>(memra::ErrorCode::internal);
  return nullptr;
}
