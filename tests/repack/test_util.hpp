// Shared helpers for the repack tests: files, sha256, the fixture models (fixture
// paths and MEMRA_REQUIRE_FIXTURES(): tests/support/fixtures.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::testing {

std::vector<uint8_t> read_bytes(const std::filesystem::path& p);
std::string read_text(const std::filesystem::path& p);
void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& data);

// sha256 (hex) of the float32 little-endian bytes of `v`, with Poco::SHA2Engine.
std::string sha256_hex(const void* data, size_t n);

// The model names under fixtures/models.
std::vector<std::string> fixture_models();

}  // namespace memra::testing
