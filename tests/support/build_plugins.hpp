// The plugins of this build (<exe>/../lib/memra/plugins: the build tree's layout, and
// that of binaries carried to a GPU machine), discovered once per test process, quiet,
// and kept for the process (engines and plans from it must not outlive their plugins).
#pragma once

#include <filesystem>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"

namespace memra::testing {

// A quiet host over `first` (searched first: test-only plugins) and this build's plugins,
// discovered; never freed (see above).
inline plugins::PluginHost* discover_build_plugins(std::vector<std::filesystem::path> first = {}) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  plugins::PluginHostOptions o;
  o.plugin_dirs = std::move(first);
  o.plugin_dirs.push_back(exe.parent_path() / ".." / "lib" / "memra" / "plugins");
  o.use_env_path = false;
  o.use_install_dir = false;
  o.services.log = [](memra_log_level, std::string_view) {};
  auto* h = new plugins::PluginHost(std::move(o));
  h->discover();
  return h;
}

inline plugins::PluginHost& build_plugins() {
  static plugins::PluginHost* host = discover_build_plugins();
  return *host;
}

}  // namespace memra::testing
