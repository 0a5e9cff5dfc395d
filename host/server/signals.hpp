// SIGTERM/SIGINT handling by sigwait: the signals are blocked in main() before
// any thread starts (threads inherit the mask), and the main thread waits for
// them synchronously, so no handler runs in async-signal context.
#pragma once

#include <optional>

namespace memra::server {

// Blocks SIGTERM and SIGINT in the calling thread and ignores SIGPIPE (a client
// that disconnects must not kill the server). Call first thing in main().
void block_termination_signals();
// Waits for SIGTERM or SIGINT; returns the signal number.
int wait_for_termination_signal();
// Waits up to `timeout_ms` for SIGTERM or SIGINT; nullopt on timeout.
std::optional<int> wait_for_termination_signal_for(int timeout_ms);

}  // namespace memra::server
