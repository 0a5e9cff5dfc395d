// Running the real memra-gen binary from a test: its path, the build tree's plugins
// and the comma-separated id lists its flags take (tests/support/command.hpp runs it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/command.hpp"

namespace memra::testing {

inline const std::string& memra_gen_binary() {
  static const std::string path = MEMRA_GEN_BINARY;
  return path;
}

inline const std::string& build_plugin_dir() {
  static const std::string dir = std::string(MEMRA_BINARY_ROOT) + "/lib/memra/plugins";
  return dir;
}

inline std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace memra::testing
