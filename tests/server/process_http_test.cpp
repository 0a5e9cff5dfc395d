// The real memra-host over loopback: routes, every error status, auth, metrics.
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/StreamCopier.h>
#include <Poco/String.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <set>
#include <sstream>

#include "error_shape.hpp"
#include "host/server/api_keys.hpp"
#include "host_process.hpp"
#include "http_client.hpp"

namespace memra::server::testing {
namespace {

constexpr const char* kGood = "sk-good-5b1c";
constexpr const char* kOther = "sk-other-77aa";
constexpr const char* kDisabled = "sk-disabled-90ef";
constexpr int kBodyLimit = 4096;

// "tiny" is not loaded (404); the embedded default model is.
const std::string kChat = R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})";
const std::string kDefaultChat =
    R"({"model":"memra-demo","messages":[{"role":"user","content":"hi"}],"max_tokens":3})";

#define EXPECT_OPENAI_ERROR(res, status_code, code, ...)                                              \
  do {                                                                                            \
    EXPECT_EQ((res).status, status_code) << (res).body;                                           \
    EXPECT_TRUE(is_openai_error((res).content_type, (res).body, code, ##__VA_ARGS__));           \
  } while (0)

// A memra-host with API keys, test routes and a 4 KiB body limit.
class ServerHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string keys = R"({"keys":[
      {"sha256":")" + sha256_hex(kGood) + R"(","tenant":"acme","limits":{"max_concurrent":4}},
      {"sha256":")" + sha256_hex(kOther) + R"(","tenant":"beta"},
      {"sha256":")" + sha256_hex(kDisabled) + R"(","tenant":"gamma","disabled":true}]})";
    const auto file = dir_.write("keys.json", keys);
    std::string why;
    host_ = HostProcess::start({"--api-keys", file.string(), "--enable-test-routes", "--max-body-bytes",
                                std::to_string(kBodyLimit)},
                               {}, &why);
    ASSERT_TRUE(host_) << why;
  }
  void TearDown() override {
    if (HasFailure() && host_) std::cerr << "memra-host log:\n" << host_->log();
  }
  HttpResponse call(const HttpRequest& r) { return http(host_->port(), r); }
  // Sends `wire` on a fresh connection and reads until the server closes it (or 5 s pass).
  std::string raw_exchange(const std::string& wire) {
    Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", static_cast<Poco::UInt16>(host_->port())));
    sock.setReceiveTimeout(Poco::Timespan(5, 0));
    sock.sendBytes(wire.data(), static_cast<int>(wire.size()));
    std::string got;
    char buf[4096];
    try {
      for (int r; (r = sock.receiveBytes(buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(r));
    } catch (const Poco::Exception& e) {
      got += "<" + e.displayText() + ">";
    }
    return got;
  }

  TempDir dir_;
  std::unique_ptr<HostProcess> host_;
};

TEST_F(ServerHttp, HealthIsOpenEvenWithKeys) {
  auto res = call(get("/health"));
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.content_type, "application/json");
  EXPECT_EQ(nlohmann::json::parse(res.body), nlohmann::json({{"status", "ok"}}));
  EXPECT_FALSE(res.header("x-request-id").empty());
}

// The access log is on at the default level: method, path, status and tenant per request.
TEST_F(ServerHttp, EveryRequestIsInTheAccessLog) {
  const std::string id = call(get("/v1/models", kGood)).header("x-request-id");
  ASSERT_EQ(id.rfind("req-", 0), 0u);
  const std::string want = "request " + id.substr(4) + ": GET /v1/models -> 200 (";
  for (int i = 0; i < 100 && host_->log().find(want) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const std::string log = host_->log();
  const size_t at = log.find(want);
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_NE(log.find("tenant acme", at), std::string::npos) << log.substr(at, 200);
}

// Probes and load balancers send HEAD: the GET answer's status and headers, no body.
TEST_F(ServerHttp, HeadIsGetWithoutTheBody) {
  for (const char* path : {"/health", "/ready", "/metrics"}) {
    SCOPED_TRACE(path);
    auto head = get(path, kGood);  // /metrics needs a key on this server
    head.method = "HEAD";
    auto res = call(head);
    EXPECT_EQ(res.status, 200);
    EXPECT_TRUE(res.body.empty()) << res.body;
    EXPECT_EQ(res.content_type, call(get(path, kGood)).content_type);
  }
  auto post_only = get("/v1/chat/completions", kGood);
  post_only.method = "HEAD";
  EXPECT_EQ(call(post_only).status, 405);
}

// Over a raw socket (an HTTP client would not send this): two different Content-Length
// headers, or Content-Length with Transfer-Encoding, get one 400 and the connection
// closes, so no "second request" can be smuggled in the body.
TEST_F(ServerHttp, AmbiguousFramingOnTheWireGetsOne400AndAClose) {
  const std::string body = kDefaultChat;
  const std::string n = std::to_string(body.size());
  for (const std::string& framing : {"Content-Length: " + n + "\r\nContent-Length: 5\r\n",
                                    "Content-Length: " + n + "\r\nTransfer-Encoding: chunked\r\n"}) {
    SCOPED_TRACE(framing);
    Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", static_cast<Poco::UInt16>(host_->port())));
    sock.setReceiveTimeout(Poco::Timespan(5, 0));
    const std::string smuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    const std::string wire = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + std::string(kGood) +
                             "\r\nContent-Type: application/json\r\n" + framing + "\r\n" + body + smuggled;
    sock.sendBytes(wire.data(), static_cast<int>(wire.size()));
    std::string got;
    char buf[4096];
    for (int r; (r = sock.receiveBytes(buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(r));
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
    EXPECT_NE(got.find("conflicting_"), std::string::npos) << got;
    EXPECT_EQ(got.find("HTTP/1.1", 1), std::string::npos) << "a second response came back:\n" << got;
  }
}

// What the old Poco server dropped without a word (a Content-Length that is not a number)
// or took ambiguously (a space before the colon, folded lines) gets a JSON 400 and a close.
TEST_F(ServerHttp, MalformedFramingOnTheWireGetsAJson400) {
  for (const std::string& fields : {std::string("Content-Length: abc\r\n"), std::string("Content-Length: -5\r\n"),
                                   std::string("Content-Length : 5\r\n"), std::string("X-A: b\r\n c\r\n")}) {
    SCOPED_TRACE(fields);
    const std::string got = raw_exchange("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + fields + "\r\nhello");
    ASSERT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
    const std::string body = got.substr(got.find("\r\n\r\n") + 4);
    EXPECT_TRUE(is_openai_error("application/json", body, fields.find("Length:") != std::string::npos
                                                              ? "invalid_content_length" : "malformed_request"))
        << body;
    EXPECT_NE(got.find("Connection: Close"), std::string::npos) << got;
  }
}

// Requests on one connection, sent at once (pipelined), are answered in order; a client
// that sends "Expect: 100-continue" gets the interim answer before it sends its body.
TEST_F(ServerHttp, PipelinedRequestsAndExpectContinue) {
  const std::string two = "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n"
                          "Authorization: Bearer " + std::string(kGood) + "\r\nConnection: close\r\n\r\n";
  const std::string got = raw_exchange(two);
  const size_t second = got.find("HTTP/1.1 200", 1);
  ASSERT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_NE(got.find("{\"status\":\"ok\"}"), std::string::npos);
  EXPECT_NE(got.find("\"object\":\"list\"", second), std::string::npos) << got;

  Poco::Net::StreamSocket sock(Poco::Net::SocketAddress("127.0.0.1", static_cast<Poco::UInt16>(host_->port())));
  sock.setReceiveTimeout(Poco::Timespan(5, 0));
  const std::string body = kDefaultChat;
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           std::string(kGood) + "\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
                           "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  sock.sendBytes(head.data(), static_cast<int>(head.size()));
  char buf[4096];
  const int n = sock.receiveBytes(buf, sizeof buf);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "HTTP/1.1 100 Continue\r\n\r\n");
  sock.sendBytes(body.data(), static_cast<int>(body.size()));
  std::string answer;
  for (int r; (r = sock.receiveBytes(buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(r));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("chat.completion"), std::string::npos) << answer;
}

TEST_F(ServerHttp, ReadyOnceTheDefaultModelIsLoaded) {
  auto res = call(get("/ready"));  // open even with keys, for probes
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body),
            nlohmann::json::parse(R"({"status":"ready","models":["memra-demo"]})"));
}

TEST_F(ServerHttp, ModelsNeedsAKey) {
  auto res = call(get("/v1/models"));
  EXPECT_OPENAI_ERROR(res, 401, "missing_api_key");
  EXPECT_EQ(res.header("www-authenticate").rfind("Bearer", 0), 0u);
  res = call(get("/v1/models", "sk-unknown"));
  EXPECT_OPENAI_ERROR(res, 401, "invalid_api_key");
  EXPECT_EQ(res.header("www-authenticate").rfind("Bearer", 0), 0u);
  auto basic = get("/v1/models");
  basic.headers["Authorization"] = "Basic c2stZ29vZA==";
  EXPECT_OPENAI_ERROR(call(basic), 401, "missing_api_key");
  res = call(get("/v1/models", kDisabled));
  EXPECT_OPENAI_ERROR(res, 403, "api_key_disabled");
  for (const char* key : {kGood, kOther}) {
    res = call(get("/v1/models", key));
    EXPECT_EQ(res.status, 200) << res.body;
    auto doc = nlohmann::json::parse(res.body);
    EXPECT_EQ(doc["object"], "list");
    ASSERT_EQ(doc["data"].size(), 1u) << res.body;
    EXPECT_EQ(doc["data"][0]["id"], "memra-demo");
    EXPECT_EQ(doc["data"][0]["object"], "model");
    EXPECT_EQ(doc["data"][0]["owned_by"], "memra");
    EXPECT_EQ(doc["data"][0]["max_model_len"], 1024);  // memra-demo's max_position_embeddings
    EXPECT_GT(doc["data"][0]["created"].get<std::int64_t>(), 1600000000);
  }
}

TEST_F(ServerHttp, UnknownRouteIs404) {
  EXPECT_OPENAI_ERROR(call(get("/v2/anything")), 404, "unknown_route");
  EXPECT_OPENAI_ERROR(call(get("/health/")), 404, "unknown_route");
  // An {id} route takes exactly one more segment.
  EXPECT_OPENAI_ERROR(call(get("/v1/responses/", kGood)), 404, "unknown_route");
  EXPECT_OPENAI_ERROR(call(get("/v1/responses/a/b", kGood)), 404, "unknown_route");
  EXPECT_OPENAI_ERROR(call(get("/v1/models/memra-demo/x", kGood)), 404, "unknown_route");
}

TEST_F(ServerHttp, IdRoutesFollowAuthAndAnswerOnlyForWhatExists) {
  EXPECT_OPENAI_ERROR(call(get("/v1/models/memra-demo")), 401, "missing_api_key");
  auto res = call(get("/v1/models/memra-demo", kGood));
  ASSERT_EQ(res.status, 200) << res.body;
  const auto one = nlohmann::json::parse(res.body);
  const auto all = nlohmann::json::parse(call(get("/v1/models", kGood)).body);
  EXPECT_EQ(one, all["data"][0]);  // the list's entry
  EXPECT_OPENAI_ERROR(call(get("/v1/models/no-such-model", kGood)), 404, "model_not_found", "model");
  EXPECT_OPENAI_ERROR(call(get("/v1/responses/resp_unknown", kGood)), 404, "response_not_found");
  auto del = get("/v1/responses/resp_unknown", kGood);
  del.method = "DELETE";
  EXPECT_OPENAI_ERROR(call(del), 404, "response_not_found");
  auto post_id = post("/v1/responses/resp_unknown", "{}", kGood);
  res = call(post_id);
  EXPECT_OPENAI_ERROR(res, 405, "method_not_allowed");
  EXPECT_EQ(res.header("allow"), "DELETE, GET, HEAD");
}

TEST_F(ServerHttp, WrongMethodIs405WithAllow) {
  auto res = call(post("/health", "{}"));
  EXPECT_OPENAI_ERROR(res, 405, "method_not_allowed");
  EXPECT_EQ(res.header("allow"), "GET, HEAD");
  res = call(get("/v1/chat/completions", kGood));
  EXPECT_OPENAI_ERROR(res, 405, "method_not_allowed");
  EXPECT_EQ(res.header("allow"), "POST");
  auto del = get("/v1/models", kGood);
  del.method = "DELETE";
  EXPECT_OPENAI_ERROR(call(del), 405, "method_not_allowed");
}

TEST_F(ServerHttp, BodyOverLimitByContentLengthIs413BeforeReading) {
  HttpRequest r = post("/v1/chat/completions", "", kGood);
  r.body.reset();
  r.declared_length = 64LL << 20;  // declared, never sent: the server must answer anyway
  auto res = call(r);
  EXPECT_OPENAI_ERROR(res, 413, "request_too_large");
  EXPECT_EQ(Poco::toLower(res.header("connection")), "close");
}

TEST_F(ServerHttp, ChunkedBodyOverLimitIs413) {
  HttpRequest r = post("/v1/chat/completions", std::string(3 * kBodyLimit, ' ') + kChat, kGood);
  r.chunked = true;
  EXPECT_OPENAI_ERROR(call(r), 413, "request_too_large");
}

TEST_F(ServerHttp, ChunkedBodyWithinLimitIsRead) {
  HttpRequest r = post("/v1/chat/completions", kChat, kGood);
  r.chunked = true;
  EXPECT_OPENAI_ERROR(call(r), 404, "model_not_found", "model");
  r = post("/v1/chat/completions", kDefaultChat, kGood);
  r.chunked = true;
  EXPECT_EQ(call(r).status, 200);
}

TEST_F(ServerHttp, AuthIsCheckedBeforeTheBody) {
  HttpRequest r = post("/v1/chat/completions", "", "");
  r.body.reset();
  r.declared_length = 64LL << 20;
  EXPECT_OPENAI_ERROR(call(r), 401, "missing_api_key");
}

TEST_F(ServerHttp, MalformedJsonIs400) {
  auto res = call(post("/v1/chat/completions", R"({"model":"tiny","messages":[)", kGood));
  EXPECT_OPENAI_ERROR(res, 400, "invalid_json");
  EXPECT_EQ(nlohmann::json::parse(res.body)["error"]["type"], "invalid_request_error");
  EXPECT_OPENAI_ERROR(call(post("/v1/completions", "", kGood)), 400, "invalid_json");
}

// Anthropic's clients read the request id from `request-id`: /v1/messages answers carry it
// beside x-request-id (the same id); the OpenAI routes keep x-request-id alone.
TEST_F(ServerHttp, MessagesAnswersCarryAnthropicsRequestIdHeader) {
  auto res = call(post("/v1/messages", R"({"model":"tiny","messages":[{"role":"user","content":"x"}]})", kGood));
  EXPECT_EQ(res.status, 400) << res.body;  // max_tokens is required
  EXPECT_FALSE(res.header("request-id").empty());
  EXPECT_EQ(res.header("request-id"), res.header("x-request-id"));
  auto openai = call(post("/v1/chat/completions", R"({"model":"tiny"})", kGood));
  EXPECT_FALSE(openai.header("x-request-id").empty());
  EXPECT_TRUE(openai.header("request-id").empty());
}

TEST_F(ServerHttp, BadShapeIs400NamingTheParam) {
  EXPECT_OPENAI_ERROR(call(post("/v1/chat/completions", R"({"model":"tiny"})", kGood)), 400,
                      "missing_required_parameter", "messages");
  EXPECT_OPENAI_ERROR(
      call(post("/v1/chat/completions", R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"top_p":2})",
                kGood)),
      400, "invalid_value", "top_p");
  EXPECT_OPENAI_ERROR(call(post("/v1/completions", R"({"model":"tiny"})", kGood)), 400, "missing_required_parameter",
                      "prompt");
}

TEST_F(ServerHttp, WrongContentTypeIs415) {
  HttpRequest r = post("/v1/chat/completions", kChat, kGood);
  r.content_type = "application/x-www-form-urlencoded";
  EXPECT_OPENAI_ERROR(call(r), 415, "unsupported_media_type");
  r.content_type = "text/plain";
  EXPECT_OPENAI_ERROR(call(r), 415, "unsupported_media_type");
  r.content_type = "application/json; charset=utf-8";
  EXPECT_OPENAI_ERROR(call(r), 404, "model_not_found", "model");
  r.content_type = "";  // absent: accepted as JSON
  EXPECT_OPENAI_ERROR(call(r), 404, "model_not_found", "model");
}

TEST_F(ServerHttp, UnknownModelIs404AndTheLoadedOneAnswers) {
  EXPECT_OPENAI_ERROR(call(post("/v1/chat/completions", kChat, kGood)), 404, "model_not_found", "model");
  EXPECT_OPENAI_ERROR(call(post("/v1/completions", R"({"model":"tiny","prompt":"hi"})", kOther)), 404,
                      "model_not_found", "model");
  EXPECT_OPENAI_ERROR(call(post("/tokenize", R"({"model":"tiny","prompt":"hi"})", kOther)), 404, "model_not_found",
                      "model");
  EXPECT_OPENAI_ERROR(call(post("/v1/chat/completions", kDefaultChat, kDisabled)), 403, "api_key_disabled");
  EXPECT_OPENAI_ERROR(call(post("/tokenize", R"({"model":"memra-demo","prompt":"hi"})")), 401,
                      "missing_api_key");
  auto res = call(post("/v1/chat/completions", kDefaultChat, kGood));
  ASSERT_EQ(res.status, 200) << res.body;
  auto doc = nlohmann::json::parse(res.body);
  EXPECT_EQ(doc["object"], "chat.completion");
  EXPECT_EQ(doc["usage"]["completion_tokens"].get<int>() + doc["usage"]["prompt_tokens"].get<int>(),
            doc["usage"]["total_tokens"].get<int>());
}

TEST_F(ServerHttp, HandlerExceptionIs500AndTheServerSurvives) {
  EXPECT_OPENAI_ERROR(call(get("/debug/throw", kGood)), 500, "internal_error");
  EXPECT_EQ(call(get("/health")).status, 200);
}

TEST_F(ServerHttp, KeepAliveConnectionServesManyRequests) {
  Poco::Net::HTTPClientSession session("127.0.0.1", static_cast<Poco::UInt16>(host_->port()));
  session.setKeepAlive(true);
  for (int i = 0; i < 5; ++i) {
    Poco::Net::HTTPRequest req("POST", "/v1/chat/completions", Poco::Net::HTTPMessage::HTTP_1_1);
    req.setKeepAlive(true);
    req.set("Authorization", std::string("Bearer ") + kGood);
    req.setContentType("application/json");
    const std::string body = i % 2 ? kChat : "{bad";
    req.setContentLength64(static_cast<Poco::Int64>(body.size()));
    session.sendRequest(req) << body;
    Poco::Net::HTTPResponse res;
    std::string text;
    Poco::StreamCopier::copyToString(session.receiveResponse(res), text);
    EXPECT_EQ(static_cast<int>(res.getStatus()), i % 2 ? 404 : 400) << text;
    EXPECT_TRUE(res.getKeepAlive());
  }
}

// ---- metrics -----------------------------------------------------------------

struct Exposition {
  std::map<std::string, std::string> help, type;  // family -> text
  std::map<std::string, double> samples;         // canonical series (labels sorted) -> value
};

// Parses the Prometheus text format strictly enough to catch malformed output:
// every sample belongs to a family that has # HELP and # TYPE before it.
::testing::AssertionResult parse_exposition(const std::string& text, Exposition* out) {
  static const std::regex kComment(R"(# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*))");
  static const std::regex kSample(R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ([-+0-9.eE]+|NaN|\+Inf|-Inf))");
  static const std::regex kLabel(R"(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)\",?)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::smatch m;
    if (line[0] == '#') {
      if (!std::regex_match(line, m, kComment)) return ::testing::AssertionFailure() << "bad comment: " << line;
      (m[1] == "HELP" ? out->help : out->type)[m[2]] = m[3];
      if (m[1] == "TYPE" && !std::set<std::string>{"counter", "gauge", "histogram", "summary", "untyped"}.count(m[3])) {
        return ::testing::AssertionFailure() << "bad type: " << line;
      }
      continue;
    }
    if (!std::regex_match(line, m, kSample)) return ::testing::AssertionFailure() << "bad sample: " << line;
    std::string name = m[1];
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (!out->type.count(family) && family.size() > s.size() && family.ends_with(s)) {
        family = family.substr(0, family.size() - s.size());
      }
    }
    if (!out->help.count(family) || !out->type.count(family)) {
      return ::testing::AssertionFailure() << "sample without # HELP/# TYPE: " << line;
    }
    std::map<std::string, std::string> labels;
    std::string rest = m[3];
    for (std::sregex_iterator it(rest.begin(), rest.end(), kLabel), end; it != end; ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    std::string key = name + "{";
    for (const auto& [k, v] : labels) key += k + "=\"" + v + "\",";
    key += "}";
    out->samples[key] = std::stod(m[4]);
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ServerHttp, MetricsFollowAuthAndParse) {
  EXPECT_OPENAI_ERROR(call(get("/metrics")), 401, "missing_api_key");
  const double before_launch =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();

  auto scrape = [&] {
    auto res = call(get("/metrics", kGood));
    EXPECT_EQ(res.status, 200);
    EXPECT_EQ(res.content_type.rfind("text/plain", 0), 0u) << res.content_type;
    Exposition e;
    EXPECT_TRUE(parse_exposition(res.body, &e)) << res.body;
    return e;
  };
  const std::string health_ok = R"(memra_http_requests_total{method="GET",route="/health",status="200",})";
  const std::string models_401 = R"(memra_http_requests_total{method="GET",route="/v1/models",status="401",})";
  Exposition first = scrape();
  for (const char* family : {"memra_http_requests_total", "memra_process_start_time_seconds",
                             "memra_http_requests_in_flight", "memra_http_request_duration_seconds"}) {
    EXPECT_TRUE(first.help.count(family)) << family;
  }
  EXPECT_EQ(first.type["memra_http_requests_total"], "counter");
  EXPECT_EQ(first.type["memra_process_start_time_seconds"], "gauge");
  EXPECT_EQ(first.type["memra_http_request_duration_seconds"], "histogram");
  const double start = first.samples["memra_process_start_time_seconds{}"];
  EXPECT_GT(start, before_launch - 120);  // the host started moments before this test body
  EXPECT_LE(start, before_launch + 1);

  for (int i = 0; i < 3; ++i) ASSERT_EQ(call(get("/health")).status, 200);
  ASSERT_EQ(call(get("/v1/models")).status, 401);
  Exposition second = scrape();
  EXPECT_EQ(second.samples[health_ok] - first.samples[health_ok], 3.0);
  EXPECT_EQ(second.samples[models_401] - first.samples[models_401], 1.0);
  EXPECT_GE(second.samples[R"(memra_http_request_duration_seconds_count{route="/health",})"], 3.0);
}

TEST(ServerHttpTenant, TheKeysTenantIsAttachedToTheRequest) {
  TempDir dir;
  const auto file = dir.write("keys.json", R"({"keys":[{"sha256":")" + sha256_hex(kGood) + R"(","tenant":"acme"}]})");
  std::string why;
  auto host = HostProcess::start({"--api-keys", file.string(), "--log-level", "debug"}, {}, &why);
  ASSERT_TRUE(host) << why;
  ASSERT_EQ(http(host->port(), post("/v1/chat/completions", kChat, kGood)).status, 404);
  ASSERT_EQ(http(host->port(), get("/health")).status, 200);
  const std::string log = host->log();
  // The per-request debug line carries the tenant of the key that authenticated it.
  EXPECT_NE(log.find("POST /v1/chat/completions -> 404"), std::string::npos) << log;
  EXPECT_NE(log.find(", tenant acme)"), std::string::npos) << log;
  EXPECT_NE(log.find("auth: on: 1 key(s), 1 enabled"), std::string::npos) << log;
}

// ---- auth off -------------------------------------------------------------------

TEST(ServerHttpOpen, WithoutKeysEverythingIsOpenAndTheLogSaysSo) {
  std::string why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  EXPECT_EQ(http(host->port(), get("/v1/models")).status, 200);
  EXPECT_EQ(http(host->port(), get("/metrics")).status, 200);
  EXPECT_EQ(http(host->port(), post("/v1/chat/completions", kDefaultChat)).status, 200);
  EXPECT_OPENAI_ERROR(http(host->port(), get("/debug/throw")), 404, "unknown_route");  // test routes off
  const std::string log = host->log();
  EXPECT_NE(log.find("auth: off"), std::string::npos) << log;
  EXPECT_NE(log.find("no --model / MEMRA_MODELS given: serving the embedded default model memra-demo"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace memra::server::testing
