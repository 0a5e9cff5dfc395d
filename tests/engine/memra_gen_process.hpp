// Running the real memra-gen binary from a test: its path, the build tree's plugins,
// a popen wrapper and the comma-separated id lists its flags take.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace memra::testing {

inline const std::string& memra_gen_binary() {
  static const std::string path = MEMRA_GEN_BINARY;
  return path;
}

inline const std::string& build_plugin_dir() {
  static const std::string dir = std::string(MEMRA_BINARY_ROOT) + "/lib/memra/plugins";
  return dir;
}

// Runs `cmd` through the shell; returns its stdout and sets *status (pclose's).
inline std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace memra::testing
