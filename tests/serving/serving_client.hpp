// Test helpers for tests/serving: a streaming (SSE) HTTP client that can hang up
// mid-stream, Prometheus sample lookup, and a memra-host started for serving.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "../server/host_process.hpp"
#include "../server/http_client.hpp"

namespace memra::server::testing {

struct SseResult {
  int status = 0;
  std::string content_type;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                 // the whole body when the status is not 200
  std::vector<std::string> events;  // the data of each "data: ..." event, in order
  bool done = false;                // saw "data: [DONE]"
  bool hung_up = false;             // the client closed the connection early
};

// POSTs `body` to `path` and reads the event stream. `on_event` may return false
// to hang up (close the socket) right after that event.
SseResult sse_post(int port, const std::string& path, const std::string& body, const std::string& bearer = "",
                   const std::function<bool(const std::string&)>& on_event = {}, int timeout_ms = 60000);

// A chat completion streamed with ignore_eos (thousands of tokens, so it holds its slot)
// until release(), which hangs up (the server cancels it). `chat_body` is the request's
// JSON; "stream" and "ignore_eos" are set here.
class HeldStream {
 public:
  HeldStream(int port, const std::string& chat_body, const std::string& bearer = "");
  ~HeldStream() { release(); }
  // True once the server streams text for it (admitted and running).
  bool wait_started(std::chrono::milliseconds within = std::chrono::seconds(20));
  SseResult release();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false, released_ = false;
  std::future<SseResult> result_;
};

// The value of one Prometheus sample, e.g. sample(text, "memra_scheduler_running", {{"model","m"}});
// nullopt when absent.
std::optional<double> sample(const std::string& exposition, const std::string& name,
                             const std::map<std::string, std::string>& labels = {});
// Sum over every sample of `name` whose labels include `labels`.
double sample_sum(const std::string& exposition, const std::string& name,
                  const std::map<std::string, std::string>& labels = {});

// GET /metrics (with `bearer` when given).
std::string scrape(int port, const std::string& bearer = "");

// The embedded default model staged in the build tree.
std::string default_model_dir();

}  // namespace memra::server::testing
