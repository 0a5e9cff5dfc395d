// The memra_host_api callbacks. Each body catches everything: nothing may unwind
// into plugin code, which may be C.
#include "core/plugin_host/host_services.hpp"

#include "core/plugin_host/kernel_services.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace memra::plugins {

namespace detail {

struct Allocation {
  memra_memory_location location;
  uint64_t bytes;
};

struct HostServicesCtx {
  std::string name;
  std::string dir;  // the plugin file's directory
  std::shared_ptr<const HostEnvironment> env;
  mutable std::mutex mu;
  mutable std::unordered_map<std::thread::id, std::string> last_errors;  // per thread
  std::unordered_map<void*, Allocation> live;                            // host buffers
  // Module and kernel handles given to the plugin (kernel_services.hpp), kept until unload.
  std::deque<std::unique_ptr<plugins::KernelModuleHandle>> modules;
  std::deque<std::unique_ptr<plugins::KernelHandle>> kernels;

  void log(memra_log_level level, std::string_view message) const noexcept {
    try {
      std::string line;
      line.reserve(name.size() + message.size() + 3);
      line.append("[").append(name).append("] ").append(message);
      env->log(level, line);
    } catch (...) {
      // Logging must never fail the caller.
    }
  }
};

}  // namespace detail

namespace {

using detail::HostServicesCtx;
using plugins::KernelHandle;
using plugins::KernelModuleHandle;
using plugins::KernelServices;
using plugins::current_kernel_services;

constexpr uint64_t kDefaultAlignment = 64;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

HostServicesCtx* ctx_of(memra_host_ctx* ctx) { return reinterpret_cast<HostServicesCtx*>(ctx); }

void cb_log(memra_host_ctx* ctx, memra_log_level level, const char* message) {
  try {
    if (ctx == nullptr) return;
    level = std::clamp<memra_log_level>(level, MEMRA_LOG_DEBUG, MEMRA_LOG_ERROR);
    ctx_of(ctx)->log(level, message != nullptr ? message : "(null message)");
  } catch (...) {
  }
}

memra_status cb_error_report(memra_host_ctx* ctx, memra_status code, const char* message) {
  try {
    if (ctx == nullptr) return code;
    HostServicesCtx* c = ctx_of(ctx);
    std::string text = message != nullptr ? message : "";
    {
      std::lock_guard lock(c->mu);
      c->last_errors[std::this_thread::get_id()] = text;
    }
    c->log(MEMRA_LOG_DEBUG, std::string("error_report ") + memra_status_name(code) + ": " + text);
  } catch (...) {
  }
  return code;
}

memra_status cb_config_get(memra_host_ctx* ctx, const char* key, char* buf, size_t buf_size,
                           size_t* needed) {
  try {
    if (ctx == nullptr || key == nullptr || needed == nullptr || (buf == nullptr && buf_size != 0)) {
      return MEMRA_ERR_INVALID_ARGUMENT;
    }
    std::optional<std::string> value = ctx_of(ctx)->env->config(key);
    if (!value) {
      *needed = 0;
      if (buf_size > 0) buf[0] = '\0';
      return MEMRA_ERR_NOT_FOUND;
    }
    *needed = value->size() + 1;
    if (buf_size == 0) return MEMRA_ERR_INVALID_ARGUMENT;
    size_t n = std::min(value->size(), buf_size - 1);  // truncated prefix, still NUL-terminated
    std::memcpy(buf, value->data(), n);
    buf[n] = '\0';
    return buf_size >= *needed ? MEMRA_OK : MEMRA_ERR_INVALID_ARGUMENT;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

memra_status cb_device_info_get(memra_host_ctx* ctx, memra_device_info* out) {
  try {
    if (ctx == nullptr || out == nullptr || out->struct_size < MEMRA_DEVICE_INFO_STRUCT_SIZE) {
      return MEMRA_ERR_INVALID_ARGUMENT;
    }
    // Fill what both sides know; struct_size then says which fields are valid.
    size_t n = std::min(out->struct_size, sizeof(memra_device_info));
    std::memcpy(out, &ctx_of(ctx)->env->device_info(), n);
    out->struct_size = n;
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

memra_status cb_memory_alloc(memra_host_ctx* ctx, memra_memory_location location, uint64_t bytes,
                             uint64_t alignment, memra_buffer* out) {
  try {
    if (ctx == nullptr || out == nullptr || out->struct_size < MEMRA_BUFFER_STRUCT_SIZE) {
      return MEMRA_ERR_INVALID_ARGUMENT;
    }
    HostServicesCtx* c = ctx_of(ctx);
    if (location == MEMRA_MEMORY_DEVICE || location == MEMRA_MEMORY_HOST_PINNED) {
      return MEMRA_ERR_UNSUPPORTED;  // needs the CUDA backend, which does not exist yet
    }
    if (location != MEMRA_MEMORY_HOST) return MEMRA_ERR_INVALID_ARGUMENT;
    if (alignment == 0) alignment = kDefaultAlignment;
    if ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) return MEMRA_ERR_INVALID_ARGUMENT;
    alignment = std::max<uint64_t>(alignment, alignof(std::max_align_t));
    // Round up so a zero-byte request still gets a unique, freeable pointer.
    if (bytes > SIZE_MAX - alignment) return MEMRA_ERR_OUT_OF_MEMORY;
    size_t rounded = static_cast<size_t>(std::max<uint64_t>((bytes + alignment - 1) / alignment, 1) * alignment);
    void* p = nullptr;
    if (posix_memalign(&p, static_cast<size_t>(alignment), rounded) != 0 || p == nullptr) {
      return MEMRA_ERR_OUT_OF_MEMORY;
    }
    try {
      std::lock_guard lock(c->mu);
      c->live.emplace(p, detail::Allocation{location, bytes});
    } catch (...) {
      std::free(p);
      return MEMRA_ERR_OUT_OF_MEMORY;
    }
    out->location = location;
    out->bytes = bytes;
    out->ptr = p;
    out->host_handle = ctx;
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

void cb_memory_free(memra_host_ctx* ctx, memra_buffer* buffer) {
  try {
    if (ctx == nullptr || buffer == nullptr) return;
    HostServicesCtx* c = ctx_of(ctx);
    if (!MEMRA_STRUCT_HAS(buffer, memra_buffer, host_handle)) {
      c->log(MEMRA_LOG_ERROR, "memory_free: buffer struct_size too small (ignored; set MEMRA_BUFFER_STRUCT_SIZE)");
      return;
    }
    if (buffer->ptr == nullptr) return;
    bool known = false;
    {
      std::lock_guard lock(c->mu);
      known = c->live.erase(buffer->ptr) == 1;
    }
    if (!known) {
      c->log(MEMRA_LOG_ERROR,
             "memory_free: the buffer was not allocated by this plugin's memory_alloc, or was already freed "
             "(ignored)");
      return;
    }
    std::free(buffer->ptr);
    buffer->ptr = nullptr;
    buffer->bytes = 0;
    buffer->host_handle = nullptr;
  } catch (...) {
  }
}

// The kernel slots: a failure is reported like a plugin's own (error_report), so the
// plugin's later error text and the host's log both say why.
memra_status kernel_failure(HostServicesCtx* c, memra_status code, const std::string& what) {
  c->log(MEMRA_LOG_WARN, what);
  return cb_error_report(reinterpret_cast<memra_host_ctx*>(c), code, what.c_str());
}

memra_kernel_module* keep_module(HostServicesCtx* c, KernelServices* owner, memra_kernel_module* m) {
  std::lock_guard lock(c->mu);
  c->modules.push_back(std::make_unique<KernelModuleHandle>(KernelModuleHandle{owner, m}));
  return reinterpret_cast<memra_kernel_module*>(c->modules.back().get());
}

memra_status cb_kernel_module_load(memra_host_ctx* ctx, const char* name, memra_kernel_module** out) {
  try {
    if (ctx == nullptr || name == nullptr || out == nullptr) return MEMRA_ERR_INVALID_ARGUMENT;
    HostServicesCtx* c = ctx_of(ctx);
    KernelServices* k = current_kernel_services();
    if (k == nullptr)
      return kernel_failure(c, MEMRA_ERR_UNSUPPORTED, std::string("kernel_module_load(") + name +
                                                          "): no GPU backend is registering kernels on this thread (load modules "
                                                          "inside register_kernels)");
    memra_kernel_module* m = nullptr;
    std::string error;
    const memra_status st = k->module_load(c->dir, name, &m, &error);
    if (st != MEMRA_OK) return kernel_failure(c, st, std::string("kernel_module_load(") + name + "): " + error);
    *out = keep_module(c, k, m);
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

memra_status cb_kernel_module_compile(memra_host_ctx* ctx, const memra_nvrtc_request* request, memra_kernel_module** out) {
  try {
    if (ctx == nullptr || request == nullptr || out == nullptr) return MEMRA_ERR_INVALID_ARGUMENT;
    HostServicesCtx* c = ctx_of(ctx);
    KernelServices* k = current_kernel_services();
    if (k == nullptr)
      return kernel_failure(c, MEMRA_ERR_UNSUPPORTED, "kernel_module_compile: no GPU backend is registering kernels on this thread "
                                                      "(compile modules inside register_kernels)");
    memra_kernel_module* m = nullptr;
    std::string error;
    const memra_status st = k->module_compile(request, &m, &error);
    if (st != MEMRA_OK) return kernel_failure(c, st, "kernel_module_compile: " + error);
    *out = keep_module(c, k, m);
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

memra_status cb_kernel_get(memra_host_ctx* ctx, memra_kernel_module* module, const char* name, memra_kernel** out) {
  try {
    if (ctx == nullptr || module == nullptr || name == nullptr || out == nullptr) return MEMRA_ERR_INVALID_ARGUMENT;
    HostServicesCtx* c = ctx_of(ctx);
    auto* h = reinterpret_cast<KernelModuleHandle*>(module);
    memra_kernel* k = nullptr;
    std::string error;
    const memra_status st = h->owner->kernel_get(h->module, name, &k, &error);
    if (st != MEMRA_OK) return kernel_failure(c, st, std::string("kernel_get(") + name + "): " + error);
    std::lock_guard lock(c->mu);
    c->kernels.push_back(std::make_unique<KernelHandle>(KernelHandle{h->owner, k}));
    *out = reinterpret_cast<memra_kernel*>(c->kernels.back().get());
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

memra_status cb_kernel_launch(memra_host_ctx* ctx, memra_kernel* kernel, const memra_launch_config* config, void** args) {
  try {
    if (ctx == nullptr || kernel == nullptr || config == nullptr) return MEMRA_ERR_INVALID_ARGUMENT;
    auto* h = reinterpret_cast<KernelHandle*>(kernel);
    std::string error;
    const memra_status st = h->owner->kernel_launch(h->kernel, config, args, &error);
    // No log line here: a failed launch fails the op, whose error names the plugin.
    if (st != MEMRA_OK) return cb_error_report(ctx, st, ("kernel_launch: " + error).c_str());
    return MEMRA_OK;
  } catch (...) {
    return MEMRA_ERR_INTERNAL;
  }
}

}  // namespace

LogSink stderr_log_sink(memra_log_level min_level) {
  return [min_level](memra_log_level level, std::string_view line) {
    if (level < min_level) return;
    std::string out(line);
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stderr);  // one write per line
  };
}

DeviceDescription cpu_reference_device() {
  DeviceDescription d;
  d.multiprocessor_count = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) d.total_memory_bytes = uint64_t(pages) * uint64_t(page_size);
  return d;
}

HostEnvironment::HostEnvironment(HostServicesOptions options)
    : options_(std::move(options)), device_(options_.device ? *options_.device : cpu_reference_device()) {
  if (!options_.log) options_.log = stderr_log_sink();
  device_info_.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  device_info_.backend = device_.backend;
  device_info_.compute_major = device_.compute_major;
  device_info_.compute_minor = device_.compute_minor;
  device_info_.multiprocessor_count = device_.multiprocessor_count;
  device_info_.total_memory_bytes = device_.total_memory_bytes;
  device_info_.arch = device_.arch.c_str();
  device_info_.name = device_.name.c_str();
}

void HostEnvironment::log(memra_log_level level, std::string_view line) const noexcept {
  try {
    options_.log(level, line);
  } catch (...) {
  }
}

std::optional<std::string> HostEnvironment::config(std::string_view key) const {
  if (!options_.config) return std::nullopt;
  return options_.config(key);
}

HostServices::HostServices(std::string plugin_name, std::shared_ptr<const HostEnvironment> env, std::string plugin_dir)
    : ctx_(std::make_unique<detail::HostServicesCtx>()) {
  ctx_->name = std::move(plugin_name);
  ctx_->dir = std::move(plugin_dir);
  ctx_->env = std::move(env);
  api_.struct_size = MEMRA_HOST_API_STRUCT_SIZE;
  api_.abi_major = MEMRA_ABI_MAJOR;
  api_.abi_minor = MEMRA_ABI_MINOR;
  api_.ctx = reinterpret_cast<memra_host_ctx*>(ctx_.get());
  api_.log = cb_log;
  api_.error_report = cb_error_report;
  api_.config_get = cb_config_get;
  api_.device_info_get = cb_device_info_get;
  api_.memory_alloc = cb_memory_alloc;
  api_.memory_free = cb_memory_free;
  // Kernel slots: they act on the GPU backend that registers the plugin's kernels
  // (kernel_services.hpp); with none bound they fail with UNSUPPORTED and say so.
  api_.kernel_module_load = cb_kernel_module_load;
  api_.kernel_module_compile = cb_kernel_module_compile;
  api_.kernel_get = cb_kernel_get;
  api_.kernel_launch = cb_kernel_launch;
}

HostServices::~HostServices() {
  uint64_t leaked_bytes = 0;
  size_t leaked = 0;
  {
    std::lock_guard lock(ctx_->mu);
    for (auto& [ptr, alloc] : ctx_->live) {
      leaked_bytes += alloc.bytes;
      ++leaked;
      std::free(ptr);
    }
    ctx_->live.clear();
  }
  if (leaked != 0) {
    ctx_->log(MEMRA_LOG_WARN, std::to_string(leaked) + " host buffer(s), " + std::to_string(leaked_bytes) +
                                  " bytes, were never passed to memory_free; the host freed them at unload");
  }
}

const std::string& HostServices::plugin_name() const { return ctx_->name; }
const HostEnvironment& HostServices::environment() const { return *ctx_->env; }

void HostServices::clear_last_error() const {
  std::lock_guard lock(ctx_->mu);
  ctx_->last_errors.erase(std::this_thread::get_id());
}

std::string HostServices::last_error() const {
  std::lock_guard lock(ctx_->mu);
  auto it = ctx_->last_errors.find(std::this_thread::get_id());
  return it == ctx_->last_errors.end() ? std::string() : it->second;
}

void HostServices::log(memra_log_level level, std::string_view message) const noexcept {
  ctx_->log(level, message);
}

size_t HostServices::live_allocations() const {
  std::lock_guard lock(ctx_->mu);
  return ctx_->live.size();
}

}  // namespace memra::plugins
