#include "host/server/startup_modules.hpp"

namespace memra::server {

struct StartupModules::Impl {
  Poco::Logger& log;
};

StartupModules::StartupModules(Poco::Logger& log) : impl_(std::make_unique<Impl>(Impl{log})) {}
StartupModules::~StartupModules() = default;

Status StartupModules::open_registry(const std::string& path) {
  impl_->log.warning("registry: this build has no registry module yet; nothing is opened%s",
                     path.empty() ? std::string() : " (--registry " + path + " is ignored)");
  return {};
}

Status StartupModules::load_plugins(const std::vector<std::string>&) {
  impl_->log.warning("plugins: this build has no plugin host yet; no plugins are loaded");
  return {};
}

std::vector<std::string> StartupModules::plugin_report() const { return {}; }
int StartupModules::plugins_loaded() const { return 0; }

}  // namespace memra::server
