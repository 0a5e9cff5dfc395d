// Where the oracle fixtures are: $MEMRA_FIXTURES_DIR when set (fixtures copied next to
// binaries carried to a GPU machine), else the directory configured at build time
// (../shared/fixtures). Tests skip with a message when a fixture they need is absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace memra::testing {

inline std::filesystem::path fixtures_dir() {
  if (const char* p = std::getenv("MEMRA_FIXTURES_DIR"); p && *p) return p;
  return MEMRA_FIXTURES_DIR;
}

// fixtures_dir() / rel, e.g. fixture("models/llama").
inline std::filesystem::path fixture(const std::string& rel) { return fixtures_dir() / rel; }

// The whole fixture set is there (its MANIFEST.json).
inline bool fixtures_present() { return std::filesystem::exists(fixture("MANIFEST.json")); }

}  // namespace memra::testing

// In a test body: skip when the fixture set is absent.
#define MEMRA_REQUIRE_FIXTURES()                                                               \
  do {                                                                                         \
    if (!memra::testing::fixtures_present())                                                   \
      GTEST_SKIP() << "fixtures not found at " << memra::testing::fixtures_dir()                \
                   << " (set MEMRA_FIXTURES_DIR); skipping oracle test";                       \
  } while (0)
