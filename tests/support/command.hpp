// Running a shell command from a test (the real tools, the npm reference scripts,
// coreutils as an independent oracle): its exit code and output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "tests/support/temp_dir.hpp"

namespace memra::testing {

// What happens to the command's stderr: left to the test's own log, merged into `out`,
// or captured into `err`.
enum class Stderr { pass, merge, capture };

struct CommandResult {
  int exit_code = -1;  // 128+N when killed by signal N; -1 when it could not be started
  std::string out;     // stdout (and stderr with Stderr::merge)
  std::string err;     // stderr with Stderr::capture
  bool ok() const { return exit_code == 0; }
  // The output, with the exit code stored in `code` (tests that check both apart).
  std::string take_out(int& code) && {
    code = exit_code;
    return std::move(out);
  }
};

// Runs `command` through /bin/sh (quote its arguments yourself).
inline CommandResult run_command(const std::string& command, Stderr stderr_to = Stderr::pass) {
  CommandResult r;
  std::string full = command;
  std::optional<TempDir> tmp;
  std::string err_file;
  if (stderr_to == Stderr::merge) full = "(" + command + ") 2>&1";
  if (stderr_to == Stderr::capture) {
    tmp.emplace("memra-cmd");
    err_file = (*tmp / "stderr").string();
    full = "(" + command + ") 2>'" + err_file + "'";
  }
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[65536];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = status < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (stderr_to == Stderr::capture) {
    std::ifstream f(err_file, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    r.err = s.str();
  }
  return r;
}

// sha256sum (coreutils) as an independent oracle: of `text`, or of the file at `path`;
// nullopt where coreutils is absent or fails.
inline std::optional<std::string> coreutils_sha256_of_file(const std::string& path) {
  const CommandResult r = run_command("/usr/bin/sha256sum '" + path + "' 2>/dev/null");
  if (!r.ok() || r.out.size() < 64) return std::nullopt;
  return r.out.substr(0, 64);
}
inline std::optional<std::string> coreutils_sha256(const std::string& text) {
  TempDir tmp("memra-sha");
  const auto file = tmp.write("text", text);
  return coreutils_sha256_of_file(file.string());
}

}  // namespace memra::testing
