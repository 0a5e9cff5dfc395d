// Tenants and admission over HTTP: per-tenant concurrency and KV budgets (wait,
// then 429 with Retry-After), the device-full 503, prefix-cache namespaces per
// tenant and salt, hot reload of the key file, cancellation on hang-up, the
// drain with a stream in flight, and the metrics that report all of it.
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "../server/error_shape.hpp"
#include "host/server/api_keys.hpp"
#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kModel = "memra-tiny-random";

std::string chat(int max_tokens, const std::string& text = "hello there", const std::string& extra = "") {
  return R"({"model":"memra-tiny-random","messages":[{"role":"user","content":")" + text + R"("}],"max_tokens":)" +
         std::to_string(max_tokens) + extra + "}";
}

template <typename F>
bool eventually(F&& condition, std::chrono::milliseconds within = 5s) {
  for (auto deadline = std::chrono::steady_clock::now() + within; std::chrono::steady_clock::now() < deadline;) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

class ServingTenants : public ::testing::Test {
 protected:
  void start(const std::string& keys_json, std::vector<std::string> args = {}) {
    keys_ = dir_.write("keys.json", keys_json);
    args.insert(args.end(), {"--api-keys", keys_.string()});
    std::string why;
    host_ = HostProcess::start(with_tiny_random_model(args), {}, &why);
    ASSERT_TRUE(host_) << why;
  }
  void TearDown() override {
    if (HasFailure() && host_) std::cerr << "memra-host log:\n" << host_->log();
  }
  std::string key_entry(const std::string& key, const std::string& tenant, const std::string& limits = "{}") {
    return R"({"sha256":")" + sha256_hex(key) + R"(","tenant":")" + tenant + R"(","limits":)" + limits + "}";
  }
  // A scraper's key: /metrics with every tenant's series.
  std::string metrics_entry(const std::string& key) {
    return R"({"sha256":")" + sha256_hex(key) + R"(","tenant":"ops","metrics":true})";
  }
  int port() const { return host_->port(); }

  TempDir dir_;
  std::filesystem::path keys_;
  std::unique_ptr<HostProcess> host_;
};

TEST_F(ServingTenants, OverItsConcurrencyATenantWaitsThenGets429WithRetryAfter) {
  start(R"({"keys":[)" + key_entry("k-slow", "slow", R"({"max_concurrent":1,"queue_timeout_ms":1500})") + "," +
        key_entry("k-free", "free") + "," + metrics_entry("k-ops") + "]}");
  HeldStream held(port(), chat(4000, "hold"), "k-slow");
  ASSERT_TRUE(held.wait_started());
  // Another tenant is not held up.
  EXPECT_EQ(http(port(), post("/v1/chat/completions", chat(2), "k-free")).status, 200);
  const auto t0 = std::chrono::steady_clock::now();
  auto res = http(port(), post("/v1/chat/completions", chat(2), "k-slow"));
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(res.status, 429) << res.body;
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "rate_limit_exceeded"));
  EXPECT_EQ(json::parse(res.body)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(res.header("retry-after"), "2");
  EXPECT_GE(waited, 1400ms) << "it must wait queue_timeout_ms before giving up";
  // A waiter is admitted as soon as the running request ends (here: its client hangs up).
  auto waiter = std::async(std::launch::async, [this] {
    return http(port(), post("/v1/chat/completions", chat(2), "k-slow")).status;
  });
  ASSERT_TRUE(eventually([&] { return sample(scrape(port(), "k-ops"), "memra_tenant_requests_waiting", {{"tenant", "slow"}}) == 1.0; }));
  EXPECT_TRUE(held.release().hung_up);
  EXPECT_EQ(waiter.get(), 200);
  // The hang-up is in the log at the default level.
  EXPECT_TRUE(eventually([&] { return host_->log().find("the client closed the connection mid-stream") != std::string::npos; }))
      << host_->log();
  const std::string m = scrape(port(), "k-ops");
  EXPECT_EQ(sample(m, "memra_admission_rejections_total", {{"tenant", "slow"}, {"reason", "tenant_queue_timeout"}}), 1.0);
  EXPECT_GE(sample(m, "memra_queue_wait_seconds_count", {{"tenant", "slow"}, {"model", kModel}}).value_or(0), 3.0);
  EXPECT_GE(sample(m, "memra_queue_wait_seconds_sum", {{"tenant", "slow"}, {"model", kModel}}).value_or(0), 1.4);
  EXPECT_EQ(sample(m, "memra_tenant_requests_running", {{"tenant", "slow"}}), 0.0);
}

TEST_F(ServingTenants, KvTokenBudget) {
  start(R"({"keys":[)" + key_entry("k", "small", R"({"max_kv_tokens":3000,"queue_timeout_ms":300})") + "]}");
  // Alone over the budget: it can never run, so no waiting.
  auto res = http(port(), post("/v1/chat/completions", chat(3000), "k"));
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "kv_budget_exceeded", "max_tokens"));
  // n multiplies the need.
  res = http(port(), post("/v1/chat/completions", chat(1500, "hello there", R"(,"n":2)"), "k"));
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "kv_budget_exceeded", "max_tokens")) << res.body;
  // Two that fit alone but not together: the second waits queue_timeout_ms, then 429.
  std::promise<void> first_text, let_go;
  auto first = std::async(std::launch::async, [&] {
    bool told = false;
    auto go = let_go.get_future();
    return sse_post(port(), "/v1/chat/completions", chat(2900, "hello there", R"(,"stream":true,"ignore_eos":true)"), "k",
                    [&](const std::string& d) {
                      if (told || d.find("\"content\":\"\"") != std::string::npos) return true;
                      told = true;
                      first_text.set_value();
                      go.wait();
                      return false;  // hang up
                    });
  });
  first_text.get_future().wait();
  res = http(port(), post("/v1/chat/completions", chat(200), "k"));
  EXPECT_EQ(res.status, 429) << res.body;
  EXPECT_EQ(res.header("retry-after"), "1");
  let_go.set_value();
  EXPECT_TRUE(first.get().hung_up);
  EXPECT_TRUE(eventually([&] { return http(port(), post("/v1/chat/completions", chat(200), "k")).status == 200; }));
}

TEST_F(ServingTenants, ADeviceWithAFullQueueAnswers503) {
  start(R"({"keys":[)" + key_entry("k", "any") + "]}", {"--max-running", "1", "--max-waiting", "1"});
  HeldStream held(port(), chat(4000, "hold"), "k");
  ASSERT_TRUE(held.wait_started());
  auto queued = std::async(std::launch::async, [this] { return http(port(), post("/v1/chat/completions", chat(2), "k")); });
  ASSERT_TRUE(eventually([&] { return sample(scrape(port(), "k"), "memra_scheduler_waiting", {{"model", kModel}}) == 1.0; }));
  auto res = http(port(), post("/v1/chat/completions", chat(2), "k"));
  EXPECT_EQ(res.status, 503) << res.body;
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "server_overloaded"));
  EXPECT_EQ(res.header("retry-after"), "1");
  held.release();
  EXPECT_EQ(queued.get().status, 200) << "the queued request runs once the device has room";
  EXPECT_EQ(sample(scrape(port(), "k"), "memra_admission_rejections_total", {{"tenant", "any"}, {"reason", "device_full"}}),
            1.0);
}

TEST_F(ServingTenants, PriorityOrdersTheSchedulerQueue) {
  start(R"({"keys":[)" + key_entry("k-low", "low") + "," + key_entry("k-high", "high", R"({"priority":5})") + "]}",
        {"--max-running", "1"});
  HeldStream held(port(), chat(4000, "hold"), "k-low");  // occupies the only running slot
  ASSERT_TRUE(held.wait_started());
  auto waiting = [&](double n) {
    return eventually([&] { return sample(scrape(port(), "k-low"), "memra_scheduler_waiting", {{"model", kModel}}) == n; });
  };
  using Clock = std::chrono::steady_clock;
  auto timed = [this](const std::string& key) {
    auto res = http(port(), post("/v1/chat/completions", chat(30, "queued", R"(,"ignore_eos":true)"), key));
    EXPECT_EQ(res.status, 200) << res.body;
    return Clock::now();
  };
  auto low = std::async(std::launch::async, timed, std::string("k-low"));  // queued first
  ASSERT_TRUE(waiting(1));
  auto high = std::async(std::launch::async, timed, std::string("k-high"));  // queued second, higher priority
  ASSERT_TRUE(waiting(2));
  held.release();
  const auto high_done = high.get();
  const auto low_done = low.get();
  EXPECT_LT(high_done, low_done) << "with one running slot, the higher priority runs (to its end) first";
}

TEST_F(ServingTenants, PrefixCacheIsNamespacedByTenantAndSalt) {
  start(R"({"keys":[)" + key_entry("ka", "alpha") + "," + key_entry("kb", "beta") + "," + metrics_entry("k-ops") + "]}");
  const std::string text = "a long enough prompt so that the chat template and this text fill whole KV blocks";
  auto cached = [&](const std::string& key, const std::string& extra = "") {
    auto res = http(port(), post("/v1/chat/completions", chat(2, text, extra), key));
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("ka"), 0);
  EXPECT_GT(cached("ka"), 0);
  EXPECT_EQ(cached("kb"), 0) << "another tenant never hits alpha's cache";
  EXPECT_EQ(cached("ka", R"(,"cache_salt":"s1")"), 0) << "a new salt starts cold";
  EXPECT_GT(cached("ka", R"(,"cache_salt":"s1")"), 0);
  const std::string m = scrape(port(), "ka");
  EXPECT_GT(sample(m, "memra_prefix_cache_hit_tokens_total", {{"tenant", "alpha"}, {"model", kModel}}).value_or(0), 0);
  // A tenant's key sees only its own tenant's series (not even that beta exists).
  EXPECT_EQ(m.find("tenant=\"beta\""), std::string::npos) << m;
  EXPECT_NE(m.find("tenant=\"alpha\""), std::string::npos) << m;
  // The scraper's key sees every tenant.
  const std::string all = scrape(port(), "k-ops");
  EXPECT_EQ(sample(all, "memra_prefix_cache_hit_tokens_total", {{"tenant", "beta"}, {"model", kModel}}), 0.0);
  EXPECT_GT(sample(all, "memra_prefix_cache_hit_tokens_total", {{"tenant", "alpha"}, {"model", kModel}}).value_or(0), 0);
  const double ratio = sample(m, "memra_prefix_cache_hit_ratio", {{"model", kModel}}).value_or(-1);
  EXPECT_GT(ratio, 0.0);
  EXPECT_LT(ratio, 1.0);
}

// What a prompt wrote to the prefix cache is in the usage: Responses'
// input_tokens_details.cache_write_tokens and Messages' cache_creation_input_tokens (whole
// blocks new to the cache; Anthropic's input_tokens leave out both the writes and the reads).
TEST_F(ServingTenants, UsageCountsThePromptTokensWrittenToThePrefixCache) {
  start(R"({"keys":[)" + key_entry("ka", "alpha") + "]}");
  const std::string text = "a long enough prompt so that the template and this text fill whole KV blocks, written once";
  const std::string responses = json{{"model", kModel}, {"input", text}, {"max_output_tokens", 2}}.dump();
  auto usage = [&](const char* route, const std::string& body) {
    auto res = http(port(), post(route, body, "ka"));
    EXPECT_EQ(res.status, 200) << res.body;
    return json::parse(res.body)["usage"];
  };
  const json first = usage("/v1/responses", responses);
  const int64_t written = first["input_tokens_details"]["cache_write_tokens"].get<int64_t>();
  EXPECT_EQ(first["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(written, 0);
  EXPECT_EQ(written % 16, 0) << "whole blocks of 16 tokens";
  EXPECT_LE(written, first["input_tokens"].get<int64_t>());
  const json again = usage("/v1/responses", responses);
  EXPECT_GT(again["input_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(again["input_tokens_details"]["cache_write_tokens"], 0) << "its blocks were in the cache already";
  // Messages: a new prompt writes, the same prompt reads.
  const std::string messages =
      json{{"model", kModel}, {"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", text + ", and another one"}}}}}.dump();
  const json m1 = usage("/v1/messages", messages), m2 = usage("/v1/messages", messages);
  EXPECT_GT(m1["cache_creation_input_tokens"].get<int64_t>(), 0);
  EXPECT_GT(m2["cache_read_input_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(m2["cache_creation_input_tokens"], 0);
  const auto total = [](const json& u) {
    return u["input_tokens"].get<int64_t>() + u["cache_creation_input_tokens"].get<int64_t>() + u["cache_read_input_tokens"].get<int64_t>();
  };
  EXPECT_EQ(total(m1), total(m2)) << "the same prompt, however the cache served it";
}

TEST_F(ServingTenants, TheKeyFileIsReloadedWhenItChanges) {
  start(R"({"keys":[)" + key_entry("k-old", "first") + "]}");
  EXPECT_EQ(http(port(), get("/v1/models", "k-old")).status, 200);
  dir_.write("keys.json", R"({"keys":[)" + key_entry("k-new", "second", R"({"max_concurrent":2})") + "]}");
  EXPECT_TRUE(eventually([&] { return http(port(), get("/v1/models", "k-new")).status == 200; }));
  EXPECT_EQ(http(port(), get("/v1/models", "k-old")).status, 401);
  // A broken file keeps the keys in force and says why.
  dir_.write("keys.json", R"({"keys":[{"sha256":"zz","tenant":"x"}]})");
  EXPECT_TRUE(eventually([&] { return host_->log().find("previous keys stay in force") != std::string::npos; }))
      << host_->log();
  EXPECT_EQ(http(port(), get("/v1/models", "k-new")).status, 200);
  EXPECT_NE(host_->log().find("auth: reloaded"), std::string::npos);
}

TEST_F(ServingTenants, AHangUpCancelsTheSequenceAndFreesItsKv) {
  start(R"({"keys":[)" + key_entry("k", "t") + "]}");
  const std::string before = scrape(port(), "k");
  {
    HeldStream held(port(), chat(4000, "hold"), "k");
    ASSERT_TRUE(held.wait_started());
    EXPECT_EQ(sample(scrape(port(), "k"), "memra_scheduler_running", {{"model", kModel}}), 1.0);
    held.release();
  }
  std::string m;
  EXPECT_TRUE(eventually([&] {
    m = scrape(port(), "k");
    return sample(m, "memra_scheduler_running", {{"model", kModel}}) == 0.0 &&
           sample(m, "memra_kv_blocks_used", {{"model", kModel}}) == sample(m, "memra_prefix_cache_blocks", {{"model", kModel}});
  }, 2s)) << m;
  EXPECT_EQ(sample_sum(m, "memra_completions_total", {{"finish_reason", "cancelled"}}) -
                sample_sum(before, "memra_completions_total", {{"finish_reason", "cancelled"}}),
            1.0);
  EXPECT_LT(sample(m, "memra_generation_tokens_total", {{"tenant", "t"}}).value_or(1e9), 4000.0);
}

TEST_F(ServingTenants, AHangUpDuringAJsonAnswerCancelsItToo) {
  start(R"({"keys":[)" + key_entry("k", "t") + "]}");
  const std::string before = scrape(port(), "k");
  {
    Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(port()));
    Poco::Net::HTTPRequest req("POST", "/v1/chat/completions", Poco::Net::HTTPMessage::HTTP_1_1);
    const std::string body = chat(4000, "json", R"(,"ignore_eos":true)");
    req.setContentType("application/json");
    req.set("Authorization", "Bearer k");
    req.setContentLength64(static_cast<Poco::Int64>(body.size()));
    session.sendRequest(req) << body << std::flush;
    ASSERT_TRUE(eventually([&] { return sample(scrape(port(), "k"), "memra_scheduler_running", {{"model", kModel}}) == 1.0; }));
    session.abort();  // hang up without reading the answer
  }
  std::string m;
  EXPECT_TRUE(eventually([&] {
    m = scrape(port(), "k");
    return sample(m, "memra_scheduler_running", {{"model", kModel}}) == 0.0;
  }, 2s)) << m;
  EXPECT_EQ(sample_sum(m, "memra_completions_total", {{"finish_reason", "cancelled"}}) -
                sample_sum(before, "memra_completions_total", {{"finish_reason", "cancelled"}}),
            1.0);
  EXPECT_EQ(sample(m, "memra_http_requests_total", {{"route", "/v1/chat/completions"}, {"status", "499"}}), 1.0);
}

TEST_F(ServingTenants, TheDrainLetsARunningStreamFinish) {
  start(R"({"keys":[)" + key_entry("k", "t") + "]}");
  auto stream = std::async(std::launch::async, [this] {
    return sse_post(port(), "/v1/chat/completions", chat(300, "drain", R"(,"stream":true,"ignore_eos":true)"), "k");
  });
  ASSERT_TRUE(eventually([&] { return sample(scrape(port(), "k"), "memra_scheduler_running", {{"model", kModel}}) == 1.0; }));
  host_->signal(SIGTERM);
  const SseResult r = stream.get();
  EXPECT_TRUE(r.done) << "the stream was cut by the drain";
  std::string last_finish;
  for (const auto& e : r.events) {
    auto j = json::parse(e);
    if (!j["choices"].empty() && j["choices"][0]["finish_reason"].is_string()) last_finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(last_finish, "length");
  const auto code = host_->wait_exit(10000);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

// Every memra_ metric the server exports is documented in docs/SERVING.md, and
// every metric documented there is exported.
TEST_F(ServingTenants, EveryMetricIsDocumented) {
  // And the embedding model, so /v1/embeddings' counter has a sample.
  start(R"({"keys":[)" + key_entry("k", "t", R"({"max_concurrent":1,"queue_timeout_ms":0})") + "]}",
        {"--model", "emb=" MEMRA_SOURCE_ROOT "/tests/models/qwen3-embedding-tiny"});
  ASSERT_EQ(http(port(), post("/v1/embeddings", R"({"model":"emb","input":"x"})", "k")).status, 200);
  // Three tokens for sure (ignore_eos), so the inter-token histogram has observations.
  ASSERT_EQ(http(port(), post("/v1/chat/completions", chat(3, "hello there", R"(,"ignore_eos":true)"), "k")).status, 200);
  {
    HeldStream held(port(), chat(4000, "hold"), "k");  // so that a rejection is counted too
    ASSERT_TRUE(held.wait_started());
    ASSERT_EQ(http(port(), post("/v1/chat/completions", chat(3), "k")).status, 429);
  }
  const std::string m = scrape(port(), "k");
  static const std::regex kFamily(R"(# TYPE (memra_[a-z_]+) )");
  std::set<std::string> exported;
  for (std::sregex_iterator it(m.begin(), m.end(), kFamily), end; it != end; ++it) exported.insert((*it)[1]);
  std::ifstream in(std::string(MEMRA_SOURCE_ROOT) + "/docs/SERVING.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  static const std::regex kDocumented(R"(\| `(memra_[a-z_]+)` \|)");
  std::set<std::string> documented;
  for (std::sregex_iterator it(text.begin(), text.end(), kDocumented), end; it != end; ++it) documented.insert((*it)[1]);
  EXPECT_EQ(exported, documented);
  EXPECT_GE(exported.size(), 25u);
}

}  // namespace
}  // namespace memra::server::testing
