// The sibling modules memra-host opens at start: the registry (gates what may
// load) and the plugin host (family/quant plugins). They stay open for the life
// of the process. Kept behind a pimpl so the rest of the server does not depend
// on their headers.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <Poco/Logger.h>

#include "core/common/result.hpp"
#include "host/server/model_loader.hpp"

namespace memra::server {

class StartupModules {
 public:
  explicit StartupModules(Poco::Logger& log);
  ~StartupModules();
  StartupModules(const StartupModules&) = delete;
  StartupModules& operator=(const StartupModules&) = delete;

  // Opens (creating if absent) the registry at `path`, or at the registry's
  // default path when `path` is empty. A bad file is an error.
  Status open_registry(const std::string& path);

  // Discovers plugins in `dirs`, then MEMRA_PLUGIN_PATH, then
  // <exe>/../lib/memra/plugins; logs each loaded plugin and each refusal.
  // Refusals are not errors.
  Status load_plugins(const std::vector<std::string>& dirs);
  // One line per loaded plugin and per refusal, for --list-plugins.
  std::vector<std::string> plugin_report() const;
  int plugins_loaded() const;

  // Loads one model through the registry gate (needs open_registry and load_plugins first).
  // Setting *stop (a termination signal) ends a first-load repack early, leaving nothing.
  LoadOutcome load_model(const ModelSpec& spec, const HostOptions& options, const std::atomic<bool>* stop = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::server
