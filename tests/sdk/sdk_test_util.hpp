// Small helpers for the SDK tests: run a shell command (tests/support/command.hpp) with its
// stderr, quote paths (temp dirs: tests/support/temp_dir.hpp).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "tests/support/command.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::sdk_test {

using memra::testing::TempDir;

// stdout and stderr together.
inline memra::testing::CommandResult run(const std::string& cmd) {
  return memra::testing::run_command(cmd, memra::testing::Stderr::merge);
}

// Single-quotes a path for /bin/sh.
inline std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace memra::sdk_test
