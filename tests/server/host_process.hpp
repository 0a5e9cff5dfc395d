// Test helper: runs the real memra-host binary (MEMRA_HOST_BIN) as a child
// process with a clean MEMRA_* environment and a temporary MEMRA_HOME.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace memra::server::testing {

using memra::testing::TempDir;

using EnvVars = std::vector<std::pair<std::string, std::string>>;

struct RunResult {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;
  std::string err;
};

// Runs memra-host to completion (killed after `timeout_ms`).
RunResult run_host(const std::vector<std::string>& args, const EnvVars& env = {}, const std::string& stdin_text = "",
                   int timeout_ms = 20000);

// `args` after "--model memra-tiny-random=tests/models/tiny-random": the random-weight
// test model (2-layer Llama, vocabulary 1024), which the serving tests serve instead of
// the embedded default model: it is small and fast on the CPU reference backend, and
// their checks rest on its vocabulary and speed (tests/models/tiny-random/README.md).
inline std::vector<std::string> with_tiny_random_model(std::vector<std::string> args = {}) {
  args.insert(args.begin(), {"--model", "memra-tiny-random=" MEMRA_SOURCE_ROOT "/tests/models/tiny-random"});
  return args;
}

// A running memra-host that printed its "listening on" line.
class HostProcess {
 public:
  // Starts memra-host with `args` plus "--host 127.0.0.1 --port 0", waits for the
  // listening line. On failure returns nullptr and fills `why`.
  static std::unique_ptr<HostProcess> start(const std::vector<std::string>& args, const EnvVars& env,
                                            std::string* why);
  // The same process, returned as soon as it runs (before it listens; port() is 0).
  static std::unique_ptr<HostProcess> launch(const std::vector<std::string>& args, const EnvVars& env);
  ~HostProcess();

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& listening_line() const { return line_; }
  std::filesystem::path home() const { return home_.path() / "home"; }  // its MEMRA_HOME
  std::string log() const;  // what it wrote to stderr so far
  // What it wrote to stdout after the listening line, reading until `timeout_ms`
  // passes without new output (or stdout closes).
  std::string read_stdout(int timeout_ms);
  void signal(int sig) const;
  // Waits for exit; nullopt on timeout. The exit code is 128+N when killed by signal N.
  std::optional<int> wait_exit(int timeout_ms);

 private:
  HostProcess() = default;
  TempDir home_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  int port_ = 0;
  std::string line_;
  std::string stdout_rest_;  // read past the listening line
  std::optional<int> exit_code_;
};

}  // namespace memra::server::testing
