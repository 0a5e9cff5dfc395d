#include "core/plugin_host/plugin_record.hpp"

#include <boost/dll/shared_library.hpp>

namespace memra::plugins::detail {

PluginRecord::PluginRecord(std::shared_ptr<boost::dll::shared_library> library,
                           std::unique_ptr<HostServices> services, PluginInfo info,
                           const memra_plugin_descriptor* descriptor, const memra_plugin_api& api)
    : library_(std::move(library)),
      services_(std::move(services)),
      info_(std::move(info)),
      descriptor_(descriptor),
      api_(api) {}

PluginRecord::~PluginRecord() {
  // Every object from this plugin is gone (they hold this record), so the plugin
  // may now release what it holds; the host services stay valid during shutdown.
  if (api_.shutdown != nullptr) {
    call_noexcept("shutdown", [&] { api_.shutdown(api_.ctx); });
  }
  services_.reset();
  library_.reset();  // dlclose, unless something else still holds the library
}

int32_t PluginRecord::score(const memra_device_info& device, const char* handled_name) const noexcept {
  if (descriptor_->score == nullptr) return 0;
  try {
    return descriptor_->score(&device, handled_name);
  } catch (...) {
    services_->log(MEMRA_LOG_ERROR, "score threw a C++ exception; treating the plugin as unable to run");
    return -1;
  }
}

Error PluginRecord::status_error(std::string_view op, memra_status status) const {
  std::string detail = services_->last_error();
  std::string message = "plugin '" + info_.name + "': " + std::string(op) + " failed (" +
                        memra_status_name(status) + "): ";
  message += detail.empty() ? "the plugin reported no detail through error_report" : detail;
  return make_error(error_code_for(status), std::move(message));
}

Error PluginRecord::exception_error(std::string_view op, const char* what) const {
  std::string message = "plugin '" + info_.name + "': " + std::string(op) + " threw a C++ exception";
  if (what != nullptr) message += std::string(" (") + what + ")";
  message += "; plugins must not let exceptions escape — this is a plugin bug, report it to its author";
  services_->log(MEMRA_LOG_ERROR, message);
  return make_error(ErrorCode::internal, std::move(message));
}

Error PluginRecord::plugin_error(ErrorCode code, std::string_view message) const {
  return make_error(code, "plugin '" + info_.name + "': " + std::string(message));
}

}  // namespace memra::plugins::detail
