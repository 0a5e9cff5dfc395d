// The random-weight models committed under tests/models (tiny-random, qwen3-embedding-tiny):
// in the source tree, or, for binaries carried to a GPU machine, copied next to the
// fixtures (tests/cuda/carry_all.sh puts them in <fixtures>/models/).
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
