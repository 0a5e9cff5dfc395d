// In-process tests of the Router without a model: auth order, errors, metrics
// bookkeeping, connection close. Paths with a model run against the real
// binary (process_http_test.cpp, tests/serving).
#include "host/server/router.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "error_shape.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {
namespace {

using memra::server::testing::is_openai_error;

class ServerRouter : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = KeyStore::parse(R"({"keys":[{"sha256":")" + sha256_hex("good") + R"(","tenant":"acme"},
        {"sha256":")" + sha256_hex("off") + R"(","tenant":"beta","disabled":true}]})",
                                 "test");
    ASSERT_TRUE(store) << store.error().message;
    keys_ = std::make_unique<KeyRing>(std::move(*store));
  }

  Router make(bool auth = true) {
    RouterConfig config;
    config.max_body_bytes = 1024;
    config.enable_test_routes = true;
    config.models = &models_;
    return Router(config, auth ? keys_.get() : nullptr, metrics_, state_);
  }

  static Reply post(Router& router, const std::string& path, const std::string& body,
                    const std::string& auth = "Bearer good") {
    Poco::Net::HTTPRequest request("POST", path, Poco::Net::HTTPMessage::HTTP_1_1);
    request.setContentType("application/json");
    request.setContentLength64(static_cast<Poco::Int64>(body.size()));
    if (!auth.empty()) request.set("Authorization", auth);
    std::istringstream in(body);
    return router.handle(request, in);
  }

  static Reply get(Router& router, const std::string& path, const std::string& auth = "Bearer good") {
    Poco::Net::HTTPRequest request("GET", path, Poco::Net::HTTPMessage::HTTP_1_1);
    if (!auth.empty()) request.set("Authorization", auth);
    std::istringstream in;
    return router.handle(request, in);
  }

  std::unique_ptr<KeyRing> keys_;
  ModelSet models_;  // empty: nothing loaded
  Metrics metrics_{1.0};
  ServerState state_;
};

const std::string kChat = R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})";

TEST_F(ServerRouter, NoModelIs503ModelNotLoaded) {
  Router router = make();
  Reply r = post(router, "/v1/chat/completions", kChat);
  EXPECT_EQ(r.status, 503);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "model_not_loaded", "model"));
  r = post(router, "/tokenize", R"({"model":"tiny","prompt":"x"})");
  EXPECT_EQ(r.status, 503);
  r = get(router, "/ready", "");
  EXPECT_EQ(r.status, 503);
  r = get(router, "/v1/models");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(R"({"object":"list","data":[]})"));
}

TEST_F(ServerRouter, ValidationComesBeforeTheModel) {
  Router router = make();
  Reply r = post(router, "/v1/chat/completions", R"({"model":"tiny","messages":[],"bogus":1})");
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "unknown_parameter", "bogus")) << r.body;
}

TEST_F(ServerRouter, AuthComesBeforeTheBodyAndClosesTheConnection) {
  Router router = make();
  Reply r = post(router, "/v1/chat/completions", std::string(5000, 'x'), "");
  EXPECT_EQ(r.status, 401);  // not 413: an unauthenticated body is never read
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "missing_api_key"));
  EXPECT_EQ(r.header("WWW-Authenticate").rfind("Bearer", 0), 0u);
  EXPECT_TRUE(r.close_connection);  // the unread body must not be parsed as the next request
  r = post(router, "/v1/chat/completions", kChat, "Bearer off");
  EXPECT_EQ(r.status, 403);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "api_key_disabled"));
  r = post(router, "/v1/chat/completions", kChat, "Bearer nope");
  EXPECT_EQ(r.status, 401);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "invalid_api_key"));
}

TEST_F(ServerRouter, WithoutKeysEveryRouteIsOpen) {
  Router router = make(/*auth=*/false);
  EXPECT_EQ(get(router, "/v1/models", "").status, 200);
  EXPECT_EQ(get(router, "/metrics", "").status, 200);
  EXPECT_EQ(post(router, "/v1/chat/completions", kChat, "").status, 503);
}

TEST_F(ServerRouter, ExceptionBecomes500AndIsCounted) {
  Router router = make();
  Reply r = get(router, "/debug/throw");
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "internal_error"));
  const std::string text = metrics_.render();
  EXPECT_NE(text.find(R"(memra_http_requests_total{method="GET",route="/debug/throw",status="500"} 1)"),
            std::string::npos)
      << text;
}

// Request smuggling defence: framing a proxy and memra could read differently is refused,
// and the connection closed (where the body ends is unknown).
TEST_F(ServerRouter, AmbiguousBodyFramingIsRefusedAndClosesTheConnection) {
  Router router = make();
  auto chat = [&](const std::vector<std::pair<std::string, std::string>>& headers) {
    Poco::Net::HTTPRequest request("POST", "/v1/chat/completions", Poco::Net::HTTPMessage::HTTP_1_1);
    request.setContentType("application/json");
    request.set("Authorization", "Bearer good");
    for (const auto& [k, v] : headers) request.add(k, v);
    std::istringstream in(kChat);
    return router.handle(request, in);
  };
  const std::string n = std::to_string(kChat.size());
  Reply two = chat({{"Content-Length", n}, {"Content-Length", "5"}});
  EXPECT_EQ(two.status, 400);
  EXPECT_TRUE(is_openai_error(two.content_type, two.body, "conflicting_content_length")) << two.body;
  EXPECT_TRUE(two.close_connection);
  Reply both = chat({{"Content-Length", n}, {"Transfer-Encoding", "chunked"}});
  EXPECT_EQ(both.status, 400);
  EXPECT_TRUE(is_openai_error(both.content_type, both.body, "conflicting_framing")) << both.body;
  EXPECT_TRUE(both.close_connection);
  // The same length twice is not ambiguous.
  Reply same = chat({{"Content-Length", n}, {"Content-Length", n}});
  EXPECT_NE(same.status, 400) << same.body;
}

TEST_F(ServerRouter, MethodNotAllowedListsAllow) {
  Router router = make();
  Reply r = post(router, "/health", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("Allow"), "GET, HEAD");
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "method_not_allowed"));
}

TEST_F(ServerRouter, DrainingRepliesCarryRetryAfter) {
  Router router = make();
  Poco::Net::HTTPRequest request("GET", "/health", Poco::Net::HTTPMessage::HTTP_1_1);
  Reply r = router.reject_draining(request);
  EXPECT_EQ(r.status, 503);
  EXPECT_FALSE(r.header("Retry-After").empty());
  EXPECT_TRUE(r.close_connection);
  EXPECT_TRUE(is_openai_error(r.content_type, r.body, "server_shutting_down"));
}

TEST_F(ServerRouter, AdmissionStopsAtDrain) {
  {
    auto a = state_.try_admit();
    EXPECT_TRUE(a);
    EXPECT_EQ(state_.admitted(), 1);
    state_.begin_drain();
    EXPECT_FALSE(state_.try_admit());
    EXPECT_EQ(state_.admitted(), 1);
  }
  EXPECT_EQ(state_.admitted(), 0);
}

}  // namespace
}  // namespace memra::server
