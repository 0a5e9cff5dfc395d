// Shared helpers of the repack_format tests: files, commands, the llama fixture's
// original weights in GGUF row order.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::repack_test {

using memra::testing::TempDir;

std::vector<uint8_t> read_bytes(const std::filesystem::path& p);
std::string read_text(const std::filesystem::path& p);
void write_bytes(const std::filesystem::path& p, const void* data, size_t n);
std::string sha256_file(const std::filesystem::path& p);  // lower-case hex
// Names of entries in a directory (files and dirs), sorted.
std::vector<std::string> list_dir(const std::filesystem::path& dir);

// Runs a shell command, capturing stdout (+ stderr when merge_stderr); returns the exit code.
int run_command(const std::string& cmd, std::string* output, bool merge_stderr = true);

// The llama fixture's weights (models/llama, bf16 -> exact float32), keyed by GGUF
// tensor name, with attn_q/attn_k rows permuted the way llama.cpp's converter does, so
// each matches the same-named tensor of gguf/llama/*.gguf row for row.
struct OriginalTensor {
  std::vector<uint64_t> shape;  // outermost first
  std::vector<float> values;
};
std::map<std::string, OriginalTensor> llama_originals_gguf_order();

}  // namespace memra::repack_test
