// Helpers for the registry tests: temporary directories, raw sqlite access
// (the oracle for what is really in the file), and running the real CLI.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "registry/registry.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::registry::test {

using memra::testing::TempDir;

// Runs SQL on the file with sqlite3 directly (not through the registry) and
// returns every row's columns joined by '|'. Fails the current test on error.
std::vector<std::string> raw_query(const std::filesystem::path& db, const std::string& sql);
// Runs `sql` on an in-memory database with ?1 bound to `text` (used to read JSON
// with sqlite's own JSON functions, independently of the registry's parser).
std::vector<std::string> sql_on_text(const std::string& sql, const std::string& text);
void raw_exec(const std::filesystem::path& db, const std::string& sql);

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the memra-registry binary with `args`. The child's environment is ours
// minus MEMRA_* variables, plus `env` (so a developer's settings never leak in).
CliResult run_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {});

// Sets (or unsets, for nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A plausible checkpoint row (sha256 = 64 × hex).
CheckpointInfo sample_checkpoint(const std::string& path, char hex = 'a');

}  // namespace memra::registry::test
