// Shared helpers for the repack tests: fixture paths, files, sha256.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace memra::testing {

std::filesystem::path fixtures_dir();
bool fixtures_present();
std::filesystem::path fixture(const std::string& rel);  // fixtures_dir() / rel

std::vector<uint8_t> read_bytes(const std::filesystem::path& p);
std::string read_text(const std::filesystem::path& p);
void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& data);

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// sha256 (hex) of the float32 little-endian bytes of `v`, with Poco::SHA2Engine.
std::string sha256_hex(const void* data, size_t n);

// The model names under fixtures/models.
std::vector<std::string> fixture_models();

}  // namespace memra::testing

#define MEMRA_REQUIRE_FIXTURES()                                                              \
  do {                                                                                        \
    if (!memra::testing::fixtures_present())                                                  \
      GTEST_SKIP() << "fixtures not found at " << memra::testing::fixtures_dir()               \
                   << " (set MEMRA_FIXTURES_DIR); skipping oracle test";                      \
  } while (0)
