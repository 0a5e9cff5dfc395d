#include "host/server/signals.hpp"

#include <cerrno>
#include <csignal>
#include <ctime>

namespace memra::server {

sigset_t reload_set();

namespace {

sigset_t termination_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

sigset_t reload_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGHUP);
  return set;
}

void block_termination_signals() {
  sigset_t set = termination_set();
  sigaddset(&set, SIGHUP);  // taken by ReloadSignalWatch (TLS certificate reload)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int wait_for_termination_signal() {
  const sigset_t set = termination_set();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

std::optional<int> wait_for_termination_signal_for(int timeout_ms) {
  const sigset_t set = termination_set();
  timespec timeout{timeout_ms / 1000, static_cast<long>(timeout_ms % 1000) * 1000000L};
  while (true) {
    const int sig = sigtimedwait(&set, nullptr, &timeout);
    if (sig > 0) return sig;
    if (errno == EAGAIN) return std::nullopt;
    if (errno != EINTR) return std::nullopt;
  }
}

ReloadSignalWatch::ReloadSignalWatch(std::function<void()> on_reload)
    : thread_([this, on_reload = std::move(on_reload)] {
        const sigset_t set = reload_set();
        while (!done_.load()) {
          timespec timeout{0, 100 * 1000000L};
          if (sigtimedwait(&set, nullptr, &timeout) == SIGHUP) on_reload();
        }
      }) {}

ReloadSignalWatch::~ReloadSignalWatch() {
  done_ = true;
  thread_.join();
}

StartupStopWatch::StartupStopWatch()
    : thread_([this] {
        while (!done_.load()) {
          if (const auto sig = wait_for_termination_signal_for(50)) {
            signal_ = *sig;
            stop_ = true;
            return;
          }
        }
      }) {}

StartupStopWatch::~StartupStopWatch() {
  done_ = true;
  thread_.join();
}

}  // namespace memra::server
