// The exactness contract over HTTP: a request's answer (text, logprobs,
// finish_reason) is byte-identical served alone, among 16 concurrent others,
// streamed, and with a prefix-cache hit -- greedy and seeded sampling alike.
// The oracle is the same request served alone on an idle server.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>

#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;

constexpr int kRequests = 17;

// Distinct chats (they differ within the first KV block, so none hits another's
// cache), long enough (> 16 tokens) for the prefix cache to hold whole blocks.
json request(int i, bool sampled, const std::string& salt) {
  json body = {{"model", "memra-tiny-random"},
               {"messages", json::array({{{"role", "system"}, {"content", std::to_string(i * 37 + 11) + " is your number, test."}},
                                         {{"role", "user"},
                                          {"content", "Write about item " + std::to_string(i * 7919 % 1000) +
                                                          " and why it matters to everyone here."}}})},
               {"max_tokens", 12 + i % 5},
               {"logprobs", true},
               {"top_logprobs", 2},
               {"cache_salt", salt}};
  if (sampled) {
    body["temperature"] = 0.9;
    body["top_p"] = 0.95;
    body["seed"] = 4242 + i;
  } else {
    body["temperature"] = 0;
  }
  return body;
}

struct Answer {
  std::string choices;  // the "choices" array, dumped: text + logprobs + finish_reason
  std::string text;
  int cached = -1;
};

Answer ask(int port, const json& body) {
  auto res = http(port, post("/v1/chat/completions", body.dump()));
  EXPECT_EQ(res.status, 200) << res.body;
  auto doc = json::parse(res.body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("choices")) return {};
  return {doc["choices"].dump(), doc["choices"][0]["message"]["content"], doc["usage"]["prompt_tokens_details"]["cached_tokens"]};
}

std::string ask_streamed(int port, json body) {
  body["stream"] = true;
  const SseResult r = sse_post(port, "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.done);
  std::string text;
  for (const auto& e : r.events) {
    auto chunk = json::parse(e);
    for (const auto& c : chunk["choices"]) text += c["delta"].value("content", "");
  }
  return text;
}

class ServingExactness : public ::testing::TestWithParam<bool> {};

TEST_P(ServingExactness, AloneConcurrentStreamedAndCachedAgree) {
  const bool sampled = GetParam();
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model({"--max-running", "32"}), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();

  // Alone, one at a time, each on a fresh cache namespace.
  std::vector<Answer> alone;
  for (int i = 0; i < kRequests; ++i) {
    alone.push_back(ask(port, request(i, sampled, "alone")));
    EXPECT_EQ(alone.back().cached, 0) << i;
  }
  // All 17 at once (another namespace, so none is a cache hit).
  std::vector<std::future<Answer>> together;
  for (int i = 0; i < kRequests; ++i) {
    together.push_back(std::async(std::launch::async, [port, i, sampled] { return ask(port, request(i, sampled, "together")); }));
  }
  for (int i = 0; i < kRequests; ++i) {
    const Answer a = together[static_cast<std::size_t>(i)].get();
    EXPECT_EQ(a.choices, alone[static_cast<std::size_t>(i)].choices) << "request " << i << " alone vs among 16 others";
    EXPECT_EQ(a.cached, 0) << i;
  }
  // The same requests again in the first namespace: prefix-cache hits, same bytes.
  for (int i = 0; i < kRequests; ++i) {
    const Answer warm = ask(port, request(i, sampled, "alone"));
    EXPECT_GT(warm.cached, 0) << "request " << i << " should hit the prefix cache";
    EXPECT_EQ(warm.choices, alone[static_cast<std::size_t>(i)].choices) << "request " << i << " with a cache hit";
  }
  // Streamed, the text is the same too.
  for (int i = 0; i < kRequests; i += 4) {
    EXPECT_EQ(ask_streamed(port, request(i, sampled, "streamed")), alone[static_cast<std::size_t>(i)].text) << i;
  }
  // Another tenant namespace (salt) never hits; the first request there is cold.
  EXPECT_EQ(ask(port, request(0, sampled, "other-salt")).cached, 0);
}

INSTANTIATE_TEST_SUITE_P(Serving, ServingExactness, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("Seeded") : std::string("Greedy"); });

}  // namespace
}  // namespace memra::server::testing
