#include "tests/registry/test_util.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

extern char** environ;

namespace memra::registry::test {

std::vector<std::string> raw_query(const std::filesystem::path& db, const std::string& sql) {
  std::vector<std::string> rows;
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "raw open of " << db << ": " << (h ? sqlite3_errmsg(h) : "?");
    sqlite3_close(h);
    return rows;
  }
  sqlite3_busy_timeout(h, 10000);
  char* err = nullptr;
  auto cb = [](void* p, int n, char** vals, char**) {
    std::string row;
    for (int i = 0; i < n; ++i) row += (i ? "|" : "") + std::string(vals[i] ? vals[i] : "NULL");
    static_cast<std::vector<std::string>*>(p)->push_back(row);
    return 0;
  };
  if (sqlite3_exec(h, sql.c_str(), cb, &rows, &err) != SQLITE_OK) {
    ADD_FAILURE() << "raw query '" << sql << "' on " << db << ": " << (err ? err : "?");
    sqlite3_free(err);
  }
  sqlite3_close(h);
  return rows;
}

std::vector<std::string> sql_on_text(const std::string& sql, const std::string& text) {
  std::vector<std::string> rows;
  sqlite3* h = nullptr;
  sqlite3_open(":memory:", &h);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "prepare '" << sql << "': " << sqlite3_errmsg(h);
    sqlite3_close(h);
    return rows;
  }
  sqlite3_bind_text(st, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::string row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* v = sqlite3_column_text(st, i);
      row += (i ? "|" : "") + std::string(v ? reinterpret_cast<const char*>(v) : "NULL");
    }
    rows.push_back(row);
  }
  if (rc != SQLITE_DONE) ADD_FAILURE() << "step '" << sql << "': " << sqlite3_errmsg(h);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

void raw_exec(const std::filesystem::path& db, const std::string& sql) { (void)raw_query(db, sql); }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

CliResult run_cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  CliResult result;
  char out_tpl[] = "/tmp/memra-registry-cli-out-XXXXXX";
  char err_tpl[] = "/tmp/memra-registry-cli-err-XXXXXX";
  int out_fd = mkstemp(out_tpl);
  int err_fd = mkstemp(err_tpl);
  if (out_fd < 0 || err_fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return result;
  }

  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "MEMRA_", 6) != 0) env_strings.emplace_back(*e);
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv_strings = {MEMRA_REGISTRY_CLI};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
  } else {
    int status = 0;
    waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  result.out = read_file(out_tpl);
  result.err = read_file(err_tpl);
  unlink(out_tpl);
  unlink(err_tpl);
  return result;
}

ScopedEnv::ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) old_ = old;
  if (value)
    setenv(name_.c_str(), value->c_str(), 1);
  else
    unsetenv(name_.c_str());
}

ScopedEnv::~ScopedEnv() {
  if (old_)
    setenv(name_.c_str(), old_->c_str(), 1);
  else
    unsetenv(name_.c_str());
}

CheckpointInfo sample_checkpoint(const std::string& path, char hex) {
  CheckpointInfo c;
  c.source_path = path;
  c.format = CheckpointFormat::safetensors;
  c.sha256 = std::string(64, hex);
  c.size_bytes = 123456789;
  c.family = "llama";
  c.architecture = "LlamaForCausalLM";
  c.quant = "bf16";
  c.parameters_json = R"({"hidden_size":2048,"num_hidden_layers":16})";
  return c;
}

}  // namespace memra::registry::test
