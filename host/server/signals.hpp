// SIGTERM/SIGINT handling by sigwait: the signals are blocked in main() before
// any thread starts (threads inherit the mask), and the main thread waits for
// them synchronously, so no handler runs in async-signal context.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

namespace memra::server {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and ignores SIGPIPE (a client
// that disconnects must not kill the server). Call first thing in main().
void block_termination_signals();
// Waits for SIGTERM or SIGINT; returns the signal number.
int wait_for_termination_signal();
// Waits up to `timeout_ms` for SIGTERM or SIGINT; nullopt on timeout.
std::optional<int> wait_for_termination_signal_for(int timeout_ms);

// While the server serves, a thread of its own takes SIGHUP and calls `on_reload`
// (the TLS certificate and key are read again; docs/SERVING.md, "TLS"). Before it
// exists, a SIGHUP stays pending (blocked) and is taken once it does.
class ReloadSignalWatch {
 public:
  explicit ReloadSignalWatch(std::function<void()> on_reload);
  ~ReloadSignalWatch();
  ReloadSignalWatch(const ReloadSignalWatch&) = delete;
  ReloadSignalWatch& operator=(const ReloadSignalWatch&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// While the host starts (a first-load repack can take minutes), a thread of its own
// takes SIGTERM/SIGINT: requested() turns true, and loading stops at the next point it
// can (a repack cancels and removes what it wrote). Destroy it before waiting for
// signals elsewhere; a signal that arrives after that stays pending for the next wait.
class StartupStopWatch {
 public:
  StartupStopWatch();
  ~StartupStopWatch();
  StartupStopWatch(const StartupStopWatch&) = delete;
  StartupStopWatch& operator=(const StartupStopWatch&) = delete;
  const std::atomic<bool>& requested() const { return stop_; }
  int signal() const { return signal_.load(); }  // the signal that asked, 0 if none

 private:
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<int> signal_{0};
  std::thread thread_;
};

}  // namespace memra::server
