#include "host/server/startup_modules.hpp"

#include <optional>

#include "core/plugin_host/plugin_host.hpp"
#include "registry/registry.hpp"

namespace memra::server {

struct StartupModules::Impl {
  Poco::Logger& log;
  std::optional<registry::Registry> registry;
  std::unique_ptr<plugins::PluginHost> plugin_host;
};

StartupModules::StartupModules(Poco::Logger& log) : impl_(std::make_unique<Impl>(Impl{log, std::nullopt, nullptr})) {}
StartupModules::~StartupModules() = default;

Status StartupModules::open_registry(const std::string& path) {
  std::filesystem::path file = path;
  if (file.empty()) {
    auto default_path = registry::default_path();
    if (!default_path) {
      return make_error(default_path.error().code, "registry: " + default_path.error().message +
                                                       " (memra-host takes --registry PATH)");
    }
    file = *default_path;
  }
  auto opened = registry::Registry::open(file);
  if (!opened) {
    return make_error(opened.error().code, "registry: cannot open " + file.string() + ": " +
                                               opened.error().message +
                                               " (choose another file with --registry PATH or MEMRA_REGISTRY)");
  }
  impl_->registry.emplace(std::move(*opened));
  const auto schema = impl_->registry->schema_version();
  const auto combos = impl_->registry->shipped_combos_version();
  impl_->log.information("registry: %s (schema v%s, shipped combos v%s)", impl_->registry->path().string(),
                         schema ? std::to_string(*schema) : std::string("?"),
                         combos ? std::to_string(*combos) : std::string("?"));
  return {};
}

Status StartupModules::load_plugins(const std::vector<std::string>& dirs) {
  plugins::PluginHostOptions options;
  for (const auto& d : dirs) options.plugin_dirs.emplace_back(d);
  Poco::Logger& log = impl_->log;
  // The plugin host logs one line per loaded plugin and per refusal through this sink.
  options.services.log = [&log](memra_log_level level, std::string_view line) {
    const std::string text(line);
    switch (level) {
      case MEMRA_LOG_ERROR: log.error(text); break;
      case MEMRA_LOG_WARN: log.warning(text); break;
      case MEMRA_LOG_INFO: log.information(text); break;
      default: log.debug(text); break;
    }
  };
  impl_->plugin_host = std::make_unique<plugins::PluginHost>(std::move(options));
  std::string searched;
  for (const auto& d : impl_->plugin_host->search_dirs()) searched += (searched.empty() ? "" : ", ") + d.string();
  impl_->plugin_host->discover();
  impl_->log.information("plugins: %s loaded, %s refused (searched: %s)",
                         std::to_string(impl_->plugin_host->plugins().size()),
                         std::to_string(impl_->plugin_host->refusals().size()),
                         searched.empty() ? std::string("no directories") : searched);
  return {};
}

std::vector<std::string> StartupModules::plugin_report() const {
  std::vector<std::string> lines;
  if (!impl_->plugin_host) return lines;
  for (const auto& p : impl_->plugin_host->plugins()) {
    std::string handles;
    for (const auto& h : p.handles) handles += (handles.empty() ? "" : ",") + h;
    lines.push_back("loaded  " + std::string(plugins::to_string(p.kind)) + " " + p.name + " " + p.version +
                    " abi " + std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor) + " handles " +
                    (handles.empty() ? "-" : handles) + " file " + p.file.string());
  }
  for (const auto& r : impl_->plugin_host->refusals()) {
    lines.push_back("refused " + r.file.string() + ": " + r.reason);
  }
  return lines;
}

LoadOutcome StartupModules::load_model(const ModelSpec& spec, const HostOptions& options, const std::atomic<bool>* stop) {
  if (!impl_->registry || !impl_->plugin_host) {
    LoadOutcome out;
    out.error = {LoadFailure::bad_model, "internal: the registry and plugins must be opened before models load"};
    return out;
  }
  return load_served_model(spec, options, *impl_->plugin_host, *impl_->registry, impl_->log, stop);
}

int StartupModules::plugins_loaded() const {
  return impl_->plugin_host ? static_cast<int>(impl_->plugin_host->plugins().size()) : 0;
}

}  // namespace memra::server
