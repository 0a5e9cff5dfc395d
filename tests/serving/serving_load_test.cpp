// Load: 576 requests at concurrency 32 -- chat and completions, streamed and
// not, with stop strings, n > 1, logprobs, token-id prompts, and clients that
// hang up mid-stream. Every answer that was not hung up must be complete (a
// finish_reason for every choice, [DONE] for streams, no stop text), nothing may
// fail, and afterwards the scheduler must be idle with every KV block either
// free or held by the prefix cache (read from /metrics).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kTotal = 576;
constexpr int kConcurrency = 32;
constexpr int kKinds = 8;
constexpr const char* kModel = "memra-tiny-random";

struct Plan {
  std::string path;
  json body;
  bool stream = false;
  bool hang_up = false;     // close the connection after the first text
  std::size_t choices = 1;
  std::vector<std::string> stops;
};

json chat(int i, const std::string& text) {
  return {{"model", kModel}, {"messages", json::array({{{"role", "user"}, {"content", text + " #" + std::to_string(i % 40)}}})}};
}

Plan plan(int i) {
  Plan p;
  p.path = "/v1/chat/completions";
  const std::string topic = "Tell me about topic " + std::to_string(i % 11);
  switch (i % kKinds) {
    case 0:
      p.body = chat(i, topic);
      p.body["max_tokens"] = 8;
      p.body["temperature"] = 0;
      break;
    case 1:
      p.body = chat(i, topic);
      p.body["max_tokens"] = 10;
      p.body["stop"] = "e";
      p.body["stream"] = true;
      p.body["stream_options"] = {{"include_usage", true}};
      p.stops = {"e"};
      break;
    case 2:
      p.path = "/v1/completions";
      p.body = {{"model", kModel}, {"prompt", topic}, {"max_tokens", 8}, {"n", 2}, {"stop", {" ", "a"}},
                {"temperature", 0.7}, {"seed", i}};
      p.choices = 2;
      p.stops = {" ", "a"};
      break;
    case 3:
      p.path = "/v1/completions";
      p.body = {{"model", kModel}, {"prompt", topic}, {"max_tokens", 10}, {"stream", true}};
      break;
    case 4:  // hangs up after the first text: the server must cancel it
      p.body = chat(i, topic);
      p.body["max_tokens"] = 500;
      p.body["ignore_eos"] = true;
      p.body["stream"] = true;
      p.hang_up = true;
      break;
    case 5:
      p.body = chat(i, topic);
      p.body["max_tokens"] = 8;
      p.body["logprobs"] = true;
      p.body["top_logprobs"] = 2;
      p.body["stop"] = {"\n", "o"};
      p.stops = {"\n", "o"};
      break;
    case 6:
      p.path = "/v1/completions";
      p.body = {{"model", kModel}, {"prompt", {100 + i % 50, 200, 300, 400 + i % 7}}, {"max_tokens", 6}};
      break;
    default:
      p.body = chat(i, topic);
      p.body["max_tokens"] = 8;
      p.body["n"] = 2;
      p.body["stream"] = true;
      p.choices = 2;
      break;
  }
  p.stream = p.body.value("stream", false);
  return p;
}

// Checks one exchange; returns "" when it is complete and correct.
std::string run_one(int port, const Plan& p) {
  const bool chat = p.path == "/v1/chat/completions";
  auto no_stop_text = [&](const std::string& text) -> std::string {
    for (const auto& s : p.stops) {
      if (text.find(s) != std::string::npos) return "stop text '" + s + "' in the answer: " + text;
    }
    return "";
  };
  if (!p.stream) {
    auto res = http(port, post(p.path, p.body.dump()), 120000);
    if (res.status != 200) return "status " + std::to_string(res.status) + ": " + res.body;
    auto doc = json::parse(res.body, nullptr, false);
    if (doc.is_discarded()) return "not JSON: " + res.body;
    if (doc["choices"].size() != p.choices) return "wrong number of choices: " + res.body;
    for (const auto& c : doc["choices"]) {
      const std::string finish = c.value("finish_reason", "");
      if (finish != "stop" && finish != "length") return "bad finish_reason: " + res.body;
      const std::string text = chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
      if (auto bad = no_stop_text(text); !bad.empty()) return bad;
    }
    if (doc["usage"]["completion_tokens"].get<int>() > p.body["max_tokens"].get<int>() * static_cast<int>(p.choices)) {
      return "more tokens than max_tokens: " + res.body;
    }
    return "";
  }
  bool saw_text = false;
  const SseResult r = sse_post(port, p.path, p.body.dump(), "", [&](const std::string& data) {
    if (!p.hang_up) return true;
    auto chunk = json::parse(data, nullptr, false);
    for (const auto& c : chunk["choices"]) {
      if (c.contains("delta") && !c["delta"].value("content", "").empty()) saw_text = true;
      if (c.contains("text") && !c["text"].get<std::string>().empty()) saw_text = true;
    }
    return !saw_text;  // hang up right after the first text
  }, 120000);
  if (r.status != 200) return "status " + std::to_string(r.status) + ": " + r.body;
  if (p.hang_up) return r.hung_up ? "" : "the stream ended before the client could hang up";
  if (!r.done) return "stream without [DONE]";
  std::map<int, std::string> text, finish;
  bool usage = false;
  for (const auto& e : r.events) {
    auto chunk = json::parse(e, nullptr, false);
    if (chunk.is_discarded() || chunk.contains("error")) return "bad event: " + e;
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      usage = true;
      if (!chunk["choices"].empty()) return "usage chunk with choices: " + e;
    }
    for (const auto& c : chunk["choices"]) {
      const int index = c["index"];
      text[index] += chat ? c["delta"].value("content", "") : c.value("text", "");
      if (c["finish_reason"].is_string()) finish[index] = c["finish_reason"];
    }
  }
  if (finish.size() != p.choices) return "not every choice finished (" + std::to_string(finish.size()) + ")";
  for (const auto& [index, f] : finish) {
    if (f != "stop" && f != "length") return "bad finish_reason " + f;
    if (auto bad = no_stop_text(text[index]); !bad.empty()) return bad;
  }
  const bool want_usage = p.body.contains("stream_options");
  if (usage != want_usage) return want_usage ? "no usage chunk" : "unasked usage chunk";
  return "";
}

TEST(ServingLoad, ManyMixedRequestsAllCompleteAndTheSchedulerReturnsToIdle) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model({"--max-running", "32"}), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  const std::string before = scrape(port);
  const double cancelled_before = sample_sum(before, "memra_completions_total", {{"finish_reason", "cancelled"}});

  std::atomic<int> next{0}, failures{0}, hung_up{0};
  std::mutex mu;
  std::vector<std::string> errors;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kConcurrency; ++c) {
    clients.emplace_back([&] {
      for (int i = next++; i < kTotal; i = next++) {
        const Plan p = plan(i);
        std::string error;
        try {
          error = run_one(port, p);
        } catch (const std::exception& e) {
          error = std::string("exception: ") + e.what();
        }
        if (p.hang_up && error.empty()) ++hung_up;
        if (!error.empty()) {
          ++failures;
          std::lock_guard<std::mutex> lock(mu);
          if (errors.size() < 10) errors.push_back("request " + std::to_string(i) + " (" + p.body.dump() + "): " + error);
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << kTotal << " requests at concurrency " << kConcurrency << " in " << seconds << " s\n";
  EXPECT_EQ(failures.load(), 0) << [&] {
    std::string all;
    for (const auto& e : errors) all += e + "\n";
    return all;
  }();
  EXPECT_EQ(hung_up.load(), kTotal / kKinds);

  // Back to baseline: nothing running or waiting, every KV block free or in the prefix cache.
  std::string after;
  bool idle = false;
  for (int i = 0; i < 100 && !idle; ++i) {
    after = scrape(port);
    idle = sample(after, "memra_scheduler_running", {{"model", kModel}}) == 0.0 &&
           sample(after, "memra_scheduler_waiting", {{"model", kModel}}) == 0.0 &&
           sample(after, "memra_kv_blocks_used", {{"model", kModel}}) ==
               sample(after, "memra_prefix_cache_blocks", {{"model", kModel}});
    if (!idle) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(idle) << after;
  EXPECT_GT(sample(after, "memra_kv_blocks_free", {{"model", kModel}}).value_or(0), 0.0);
  // Every hang-up was seen by the server and cancelled its sequence (none ran to its 500 tokens).
  EXPECT_EQ(sample_sum(after, "memra_completions_total", {{"finish_reason", "cancelled"}}) - cancelled_before,
            kTotal / kKinds);
  EXPECT_EQ(sample_sum(after, "memra_completions_total", {{"finish_reason", "error"}}), 0.0);
  EXPECT_EQ(sample_sum(after, "memra_http_requests_total", {{"route", "/v1/chat/completions"}}) +
                sample_sum(after, "memra_http_requests_total", {{"route", "/v1/completions"}}),
            kTotal);
  for (const char* status : {"500", "503", "429", "400"}) {
    EXPECT_EQ(sample_sum(after, "memra_http_requests_total", {{"status", status}}), 0.0) << status;
  }
  EXPECT_EQ(http(port, get("/health")).status, 200);
}

}  // namespace
}  // namespace memra::server::testing
