// Internal: one registered plugin. Shared by the PluginHost and every handle and
// object it hands out, so the library stays loaded while anything from it lives.
#pragma once

#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/plugin_host/host_services.hpp"
#include "core/plugin_host/plugin_host.hpp"

namespace boost::dll {
class shared_library;
}

namespace memra::plugins::detail {

class PluginRecord {
 public:
  // `api` is the table memra_plugin_init filled (already validated).
  PluginRecord(std::shared_ptr<boost::dll::shared_library> library, std::unique_ptr<HostServices> services,
               PluginInfo info, const memra_plugin_descriptor* descriptor, const memra_plugin_api& api);
  // Calls the plugin's shutdown slot, then drops the services, then unloads the library.
  ~PluginRecord();
  PluginRecord(const PluginRecord&) = delete;
  PluginRecord& operator=(const PluginRecord&) = delete;

  const PluginInfo& info() const { return info_; }
  const memra_plugin_descriptor& descriptor() const { return *descriptor_; }
  const memra_family_api* family() const { return api_.family; }
  const memra_quant_api* quant() const { return api_.quant; }
  std::span<const memra_op_def> ops() const { return api_.ops ? std::span<const memra_op_def>(api_.ops, api_.num_ops) : std::span<const memra_op_def>(); }
  // The plugin's context for this host (memra_plugin_api.ctx), first argument of its table calls.
  memra_plugin_ctx* ctx() const { return api_.ctx; }
  const HostServices& services() const { return *services_; }

  // Score through the descriptor's score fn (NULL -> 0; a throwing fn -> -1, logged).
  int32_t score(const memra_device_info& device, const char* handled_name) const noexcept;

  // Runs one call into the plugin: clears this thread's last error, catches any
  // exception, and turns a failing status into an Error carrying the plugin's message.
  template <class F>
  Status call(std::string_view op, F&& fn) const {
    services_->clear_last_error();
    memra_status status = MEMRA_ERR_INTERNAL;
    try {
      status = fn();
    } catch (const std::exception& e) {
      return exception_error(op, e.what());
    } catch (...) {
      return exception_error(op, nullptr);
    }
    if (status == MEMRA_OK) return {};
    return status_error(op, status);
  }

  // For destroy slots: never fails, logs an escaping exception.
  template <class F>
  void call_noexcept(std::string_view op, F&& fn) const noexcept {
    try {
      fn();
    } catch (...) {
      services_->log(MEMRA_LOG_ERROR, std::string(op) + " threw a C++ exception; plugins must catch everything");
    }
  }

  Error status_error(std::string_view op, memra_status status) const;
  Error exception_error(std::string_view op, const char* what) const;
  Error plugin_error(ErrorCode code, std::string_view message) const;

 private:
  // Declaration order is destruction order in reverse: the library goes last.
  std::shared_ptr<boost::dll::shared_library> library_;
  std::unique_ptr<HostServices> services_;
  PluginInfo info_;
  const memra_plugin_descriptor* descriptor_;  // static storage inside library_
  memra_plugin_api api_;
};

}  // namespace memra::plugins::detail
