// The random-weight models committed under tests/models (tiny-random, qwen3-embedding-tiny):
// in the source tree (the device tool's copy of the working tree has them at the same
// path), else next to the fixtures (<fixtures>/models/).
#pragma once

#include <filesystem>
#include <string>

#include "tests/support/fixtures.hpp"

namespace memra::testing {

inline std::filesystem::path test_model(const std::string& name) {
  const std::filesystem::path in_tree = std::filesystem::path(MEMRA_SOURCE_ROOT) / "tests" / "models" / name;
  return std::filesystem::exists(in_tree) ? in_tree : fixture("models/" + name);
}

}  // namespace memra::testing
