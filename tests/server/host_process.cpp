#include "host_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace memra::server::testing {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The parent's environment minus every MEMRA_* variable, plus `extra`.
std::vector<std::string> child_env(const EnvVars& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "MEMRA_", 6) != 0) env.emplace_back(*e);
  }
  for (const auto& [name, value] : extra) {
    // A later entry replaces an earlier one with the same name (getenv takes the first).
    std::erase_if(env, [&name](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
    env.push_back(name + "=" + value);
  }
  return env;
}

// fork+exec memra-host with stdin/stdout/stderr redirected to the given fds.
pid_t spawn(const std::vector<std::string>& args, const EnvVars& env, int in_fd, int out_fd, int err_fd) {
  std::vector<std::string> argv_s = {MEMRA_HOST_BIN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<std::string> env_s = child_env(env);
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    // Unblock everything: the test runner's mask must not leak into the child.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::optional<int> wait_pid(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return decode_status(status);
    if (r < 0) return std::nullopt;
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

RunResult run_host(const std::vector<std::string>& args, const EnvVars& env, const std::string& stdin_text,
                   int timeout_ms) {
  TempDir dir;
  const auto in_path = dir.write("stdin", stdin_text);
  const auto out_path = dir.path() / "stdout";
  const auto err_path = dir.path() / "stderr";
  EnvVars full = {{"MEMRA_HOME", (dir.path() / "home").string()}};
  full.insert(full.end(), env.begin(), env.end());
  const int in_fd = open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t pid = spawn(args, full, in_fd, out_fd, err_fd);
  close(in_fd);
  close(out_fd);
  close(err_fd);
  RunResult result;
  auto code = wait_pid(pid, timeout_ms);
  if (!code) {
    kill(pid, SIGKILL);
    code = wait_pid(pid, 5000);
    result.err = "[test: memra-host did not exit within " + std::to_string(timeout_ms) + " ms; killed]\n";
  }
  result.exit_code = code.value_or(-1);
  result.out = read_file(out_path);
  result.err += read_file(err_path);
  return result;
}

std::unique_ptr<HostProcess> HostProcess::launch(const std::vector<std::string>& args, const EnvVars& env) {
  std::unique_ptr<HostProcess> host(new HostProcess);
  std::vector<std::string> full_args = {"--host", "127.0.0.1", "--port", "0"};
  full_args.insert(full_args.end(), args.begin(), args.end());
  EnvVars full_env = {{"MEMRA_HOME", (host->home_.path() / "home").string()}};
  full_env.insert(full_env.end(), env.begin(), env.end());
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return nullptr;
  const int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int err_fd = open((host->home_.path() / "stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  host->pid_ = spawn(full_args, full_env, in_fd, out_pipe[1], err_fd);
  close(in_fd);
  close(err_fd);
  close(out_pipe[1]);
  host->stdout_fd_ = out_pipe[0];
  return host;
}

std::unique_ptr<HostProcess> HostProcess::start(const std::vector<std::string>& args, const EnvVars& env,
                                                std::string* why) {
  std::unique_ptr<HostProcess> host = launch(args, env);
  if (!host) {
    *why = "pipe failed";
    return nullptr;
  }
  // Read stdout up to the first newline (10 s at most).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string line;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{host->stdout_fd_, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      *why = "no listening line within 10 s; log:\n" + host->log();
      return nullptr;
    }
    char buf[256];
    const ssize_t n = read(host->stdout_fd_, buf, sizeof buf);
    if (n <= 0) {
      host->exit_code_ = wait_pid(host->pid_, 5000);
      *why = "memra-host exited (code " + std::to_string(host->exit_code_.value_or(-1)) +
             ") before listening; log:\n" + host->log();
      return nullptr;
    }
    line.append(buf, static_cast<std::size_t>(n));
  }
  host->line_ = line.substr(0, line.find('\n'));
  host->stdout_rest_ = line.substr(line.find('\n') + 1);
  static const std::regex kLine(R"(memra-host listening on https?://127\.0\.0\.1:(\d+))");
  std::smatch m;
  if (!std::regex_match(host->line_, m, kLine)) {
    *why = "unexpected first stdout line: '" + host->line_ + "'";
    return nullptr;
  }
  host->port_ = std::stoi(m[1]);
  return host;
}

HostProcess::~HostProcess() {
  if (pid_ > 0 && !exit_code_) {
    kill(pid_, SIGKILL);
    wait_pid(pid_, 5000);
  }
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

std::string HostProcess::read_stdout(int timeout_ms) {
  std::string out = std::move(stdout_rest_);
  stdout_rest_.clear();
  while (true) {
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::string HostProcess::log() const { return read_file(home_.path() / "stderr"); }

void HostProcess::signal(int sig) const { kill(pid_, sig); }

std::optional<int> HostProcess::wait_exit(int timeout_ms) {
  if (!exit_code_) exit_code_ = wait_pid(pid_, timeout_ms);
  return exit_code_;
}

}  // namespace memra::server::testing
