// memra-host: the OpenAI-compatible HTTP server. Everything lives in the
// memra_server library (host_app.cpp); this file only sets up signals.
#include <Poco/AutoPtr.h>

#include "host/server/host_app.hpp"
#include "host/server/memory_return.hpp"
#include "host/server/signals.hpp"

int main(int argc, char** argv) {
  // Before any thread exists, so every thread inherits the blocked mask and
  // SIGTERM/SIGINT reach only the main thread's sigwait.
  memra::server::block_termination_signals();
  memra::server::configure_allocator();
  Poco::AutoPtr<memra::server::HostApp> app(new memra::server::HostApp);
  return app->run_main(argc, argv);
}
