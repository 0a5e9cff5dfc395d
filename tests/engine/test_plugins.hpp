// The built plugins of this build tree (build/lib/memra/plugins), discovered once
// per test process and shared by the engine tests.
#pragma once

#include <filesystem>

#include "host/plugin_host/plugin_host.hpp"

inline memra::plugins::PluginHost& test_plugins() {
  static memra::plugins::PluginHost* host = [] {
    memra::plugins::PluginHostOptions o;
    o.plugin_dirs = {std::filesystem::path(MEMRA_BINARY_ROOT) / "lib/memra/plugins"};
    o.use_env_path = false;
    o.use_install_dir = false;
    o.services.log = [](memra_log_level, std::string_view) {};
    auto* h = new memra::plugins::PluginHost(std::move(o));  // lives as long as the process
    h->discover();
    return h;
  }();
  return *host;
}
