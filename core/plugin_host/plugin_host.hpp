// memra::plugins::PluginHost — discovers, validates, loads and selects plugins
// (libmemra-family-*.so, libmemra-quant-*.so) through the C ABI in sdk/include/memra.
//
// Usage (memra-host, tools):
//   memra::plugins::PluginHostOptions opts;
//   opts.plugin_dirs = {...};                 // --plugin-dir, repeatable
//   opts.services.log = my_sink;              // default: stderr
//   memra::plugins::PluginHost host(std::move(opts));
//   host.discover();                          // refusals are logged, never fatal
//   auto family = host.family_for(architecture, host.device_info());
//   auto plan = family->plan_create(family->normalize_config(raw_json));
//
// Lifetime: every handle and object the host hands out (FamilyPlugin, QuantPlugin,
// ModelPlan, Model) keeps its plugin's library loaded, so it may outlive the
// PluginHost. A registered plugin is never unloaded while anything from it lives;
// its `shutdown` slot runs once, after the PluginHost and every object from the
// plugin are gone.
//
// Several PluginHosts in one process: each initialises the plugins it loads itself
// (memra_plugin_init gives every host its own plugin context), so each host's
// services (log sink, config) are the ones its plugins see.
//
// Threading: discover()/load() are not thread-safe; call them at start-up. The
// const queries and the handles' calls may be used from any thread afterwards
// (the plugins themselves must then be thread-safe, as the ABI requires).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "core/plugin_host/host_services.hpp"
#include "memra/plugin.h"

namespace memra::plugins {

namespace detail {
class PluginRecord;  // one registered plugin: library, host services, tables
}

enum class PluginKind : int32_t { family = MEMRA_PLUGIN_KIND_FAMILY, quant = MEMRA_PLUGIN_KIND_QUANT };

// "family" / "quant".
std::string_view to_string(PluginKind kind);

// Maps an ABI status to the first-party error code (INTERNAL/DEVICE/OOM -> internal).
ErrorCode error_code_for(memra_status status);

struct PluginHostOptions {
  // Searched first, in order (memra-host --plugin-dir, repeatable).
  std::vector<std::filesystem::path> plugin_dirs;
  // Then MEMRA_PLUGIN_PATH (colon-separated).
  bool use_env_path = true;
  // Then the install dir <exe_dir>/../lib/memra/plugins (the build tree mirrors it).
  bool use_install_dir = true;
  // Directory of the running executable; empty = resolved from /proc/self/exe.
  std::filesystem::path exe_dir;
  // Log sink, config lookup and device the host services report to plugins.
  HostServicesOptions services;
};

// A file that was not registered, and why (the same text as its log line).
struct Refusal {
  std::filesystem::path file;
  std::string reason;
};

// A copy of a registered plugin's descriptor, safe to keep.
struct PluginInfo {
  std::string name;
  std::string version;
  std::string description;
  PluginKind kind = PluginKind::family;
  std::filesystem::path file;
  std::vector<std::string> handles;  // architectures (family) or schemes (quant)
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
};

class ModelPlan;
class Model;

// Shared base of the plugin handles: keeps the plugin loaded while it lives.
class PluginHandle {
 public:
  const PluginInfo& info() const;
  // The plugin's score for `handled_name` on `device` (NULL score fn -> 0; < 0: cannot run;
  // a score fn that throws counts as -1).
  int32_t score(const memra_device_info& device, const std::string& handled_name) const;
  // The message this plugin last passed to error_report on the calling thread ("" if none).
  std::string last_error() const;

 protected:
  explicit PluginHandle(std::shared_ptr<const detail::PluginRecord> record);
  std::shared_ptr<const detail::PluginRecord> record_;
};

// A family plugin: normalised config -> model plan -> model -> forward pass.
class FamilyPlugin : public PluginHandle {
 public:
  const memra_family_api& api() const;  // raw table, for callers that need a slot directly
  // The normalised config JSON of a raw config (memra/family.h, config_normalize).
  Result<std::string> normalize_config(const std::string& raw_json) const;
  // The canonical name of a checkpoint tensor ("hf" | "gguf"); nullopt: not one it reads.
  Result<std::optional<std::string>> tensor_name(const std::string& format, const std::string& source_name) const;
  // The parts a checkpoint tensor is of canonical tensors (memra/family.h tensor_parts, ABI
  // 2.11) as the plugin's JSON array; nullopt: none (the plugin has no such slot, or this
  // tensor is named by tensor_name alone).
  Result<std::optional<std::string>> tensor_parts(const std::string& format, const std::string& source_name) const;
  // Fails (with the plugin's message) when the config is not one it can plan.
  Result<ModelPlan> plan_create(const std::string& config_json) const;
  // The ops the plugin brings (memra_plugin_api.ops, ABI 2.7; checked at load), valid
  // while the plugin is loaded, and the context their functions take first.
  std::span<const memra_op_def> ops() const;
  memra_plugin_ctx* ctx() const;

 private:
  friend class PluginHost;
  using PluginHandle::PluginHandle;
};

// A model plan created by a family plugin; destroyed through the same plugin.
class ModelPlan {
 public:
  ModelPlan(ModelPlan&&) noexcept = default;
  ModelPlan& operator=(ModelPlan&&) noexcept = default;
  // The plan as JSON (tensors, layer groups, state).
  Result<std::string> describe() const;
  // The plan's contract (state groups, inputs, encoders); its arrays live as long as the plan.
  Result<memra_plan_info> info() const;
  // `weights` and `ops` must outlive the returned model; the model keeps this plan alive.
  Result<Model> create_model(const memra_weight_set& weights, const memra_backend_ops* ops) const;
  memra_model_plan* get() const { return plan_.get(); }
  const std::string& plugin_name() const;

 private:
  friend class FamilyPlugin;
  ModelPlan(std::shared_ptr<const detail::PluginRecord> record, std::shared_ptr<memra_model_plan> plan)
      : record_(std::move(record)), plan_(std::move(plan)) {}
  std::shared_ptr<const detail::PluginRecord> record_;
  std::shared_ptr<memra_model_plan> plan_;  // deleter calls plan_destroy and holds record_
};

// A model created by a family plugin; destroyed through the same plugin.
class Model {
 public:
  Model(Model&&) noexcept = default;
  Model& operator=(Model&&) noexcept = default;
  Status forward(const memra_forward_batch& batch) const;
  memra_model* get() const { return model_.get(); }
  const std::string& plugin_name() const;

 private:
  friend class ModelPlan;
  Model(std::shared_ptr<const detail::PluginRecord> record, std::shared_ptr<memra_model> model)
      : record_(std::move(record)), model_(std::move(model)) {}
  std::shared_ptr<const detail::PluginRecord> record_;
  std::shared_ptr<memra_model> model_;  // deleter calls model_destroy, holds the plan and record_
};

// A quant plugin: the weight layout of one or more schemes and its kernels.
class QuantPlugin : public PluginHandle {
 public:
  const memra_quant_api& api() const;
  memra_plugin_ctx* ctx() const;  // first argument of the table's functions
  Result<uint64_t> weight_bytes(const std::string& scheme, int64_t rows, int64_t cols) const;
  // src: rows*cols floats; dst: weight_bytes(scheme, rows, cols) bytes.
  Status quantize(const std::string& scheme, std::span<const float> src, int64_t rows, int64_t cols,
                  std::span<std::byte> dst) const;
  // dst: rows*cols floats.
  Status dequantize(const std::string& scheme, std::span<const std::byte> src, int64_t rows,
                    int64_t cols, std::span<float> dst) const;
  // args.struct_size must be set (MEMRA_MATMUL_ARGS_STRUCT_SIZE).
  Status matmul(const memra_matmul_args& args) const;

 private:
  friend class PluginHost;
  using PluginHandle::PluginHandle;
};

class PluginHost {
 public:
  explicit PluginHost(PluginHostOptions options = {});
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // The directories discover() scans, in precedence order, de-duplicated.
  std::vector<std::filesystem::path> search_dirs() const;
  // Scans search_dirs() and tries every libmemra-family-*.so / libmemra-quant-*.so
  // (sorted by name within a directory). Each refusal is one log line; the rest load.
  // Returns the number of plugins registered by this call.
  size_t discover();
  // Tries one file (tools, tests). The file name must follow the naming rule.
  // On refusal the reason is logged, recorded in refusals() and returned.
  Result<PluginInfo> load(const std::filesystem::path& file);

  std::vector<PluginInfo> plugins() const;  // registration order
  const std::vector<Refusal>& refusals() const;

  // Among registered plugins of that kind handling `name`, the one with the highest
  // score on `device` (ties: the earlier registered). not_found when none handles it,
  // unsupported when all that do score < 0.
  Result<FamilyPlugin> family_for(std::string_view architecture, const memra_device_info& device) const;
  Result<QuantPlugin> quant_for(std::string_view scheme, const memra_device_info& device) const;
  // By plugin name.
  Result<FamilyPlugin> family(std::string_view plugin_name) const;
  Result<QuantPlugin> quant(std::string_view plugin_name) const;

  // The device the host services report (options.services.device, default CPU reference).
  const memra_device_info& device_info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::plugins
