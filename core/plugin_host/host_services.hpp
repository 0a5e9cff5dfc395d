// Host services: the memra_host_api table each plugin receives at init.
//
// One HostEnvironment (log sink, config lookup, device) is shared by all plugins;
// each plugin gets its own HostServices whose ctx knows the plugin's name (log lines
// are prefixed with it) and keeps that plugin's per-thread last error and its live
// host allocations. No exception crosses the C boundary: every callback catches all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "memra/host_api.h"

namespace memra::plugins {

// Receives finished log lines (no trailing newline), e.g. "[q4_k] loaded 3 kernels"
// or "plugin refused: /x/libmemra-quant-foo.so: ...". Must be thread-safe.
using LogSink = std::function<void(memra_log_level level, std::string_view line)>;
// Looks up a host configuration value (flags, env, model options); nullopt = absent.
using ConfigLookup = std::function<std::optional<std::string>(std::string_view key)>;

// Writes lines at or above `min_level` to stderr.
LogSink stderr_log_sink(memra_log_level min_level = MEMRA_LOG_INFO);

// The device reported to plugins; owns the strings memra_device_info points at.
struct DeviceDescription {
  memra_backend_kind backend = MEMRA_BACKEND_CPU;
  int32_t compute_major = 0;
  int32_t compute_minor = 0;
  int32_t multiprocessor_count = 0;
  uint64_t total_memory_bytes = 0;
  std::string arch = "cpu";
  std::string name = "CPU reference";
};

// The CPU reference device: arch "cpu", hardware threads, physical memory.
DeviceDescription cpu_reference_device();

struct HostServicesOptions {
  LogSink log;                              // empty: stderr_log_sink()
  ConfigLookup config;                      // empty: every key is NOT_FOUND
  std::optional<DeviceDescription> device;  // empty: cpu_reference_device()
};

// State shared by every plugin's services; outlives the PluginHost while objects live.
class HostEnvironment {
 public:
  explicit HostEnvironment(HostServicesOptions options);
  HostEnvironment(const HostEnvironment&) = delete;
  HostEnvironment& operator=(const HostEnvironment&) = delete;

  void log(memra_log_level level, std::string_view line) const noexcept;
  std::optional<std::string> config(std::string_view key) const;
  const memra_device_info& device_info() const { return device_info_; }

 private:
  HostServicesOptions options_;
  DeviceDescription device_;
  memra_device_info device_info_{};  // points into device_
};

namespace detail {
struct HostServicesCtx;  // what memra_host_api.ctx points at
}

// The memra_host_api for one plugin. Not movable: api().ctx points into it.
class HostServices {
 public:
  // `plugin_dir`: the plugin file's directory (kernel_module_load looks there first).
  HostServices(std::string plugin_name, std::shared_ptr<const HostEnvironment> env, std::string plugin_dir = "");
  // Frees (and logs) host buffers the plugin never freed.
  ~HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const memra_host_api* api() const { return &api_; }
  const std::string& plugin_name() const;
  const HostEnvironment& environment() const;

  // Per-thread last error of this plugin: cleared before a call into the plugin,
  // read after the call fails.
  void clear_last_error() const;
  std::string last_error() const;  // "" when the plugin reported nothing on this thread

  // Host-side log line prefixed with the plugin's name.
  void log(memra_log_level level, std::string_view message) const noexcept;

  size_t live_allocations() const;

 private:
  std::unique_ptr<detail::HostServicesCtx> ctx_;
  memra_host_api api_{};
};

}  // namespace memra::plugins
