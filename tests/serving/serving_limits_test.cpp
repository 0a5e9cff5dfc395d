// Requests built to kill or exhaust the server, against the real memra-host (CPU backend,
// the tiny random model, loopback): $ref chains, nesting inside JSON strings the server
// parses, schemas whose grammar multiplies out, self-referential schemas, prompts far past
// the context, objects with hundreds of thousands of keys. Each, at its reported size and
// larger, must get a 4xx in the API's error shape within a second, leave the server alive
// and its resident memory within 200 MB of its warm baseline -- also after 100 such prompts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../server/error_shape.hpp"
#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kModel = "memra-tiny-random";
constexpr double kMaxSeconds = 1.0;
constexpr long kMaxGrowthKb = 200 * 1024;

// A ChatML template that shows the tools (so forced tool calls compile their grammar).
constexpr const char* kToolsTemplate =
    "{%- if tools %}<|im_start|>system\n{%- for t in tools %}{{ t | tojson }}\n{%- endfor %}<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- if m.tool_calls %}{%- for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{%- endfor %}"
    "{%- endif %}<|im_end|>\n{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

long rss_kb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

json chat(json extra = json::object()) {
  json b = {{"model", kModel}, {"messages", json::array({user("hi")})}, {"max_tokens", 2}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

json ref_chain(int links) {
  json defs = json::object();
  for (int i = 0; i < links; ++i) defs["a" + std::to_string(i)] = {{"$ref", "#/$defs/a" + std::to_string(i + 1)}};
  defs["a" + std::to_string(links)] = {{"type", "integer"}};
  return {{"$defs", defs}, {"$ref", "#/$defs/a0"}};
}

json square(int n) {
  return {{"type", "array"}, {"minItems", n}, {"items", {{"type", "array"}, {"minItems", n}, {"items", {{"type", "integer"}}}}}};
}

json tool(const json& parameters) {
  return {{"type", "function"}, {"function", {{"name", "f"}, {"parameters", parameters}}}};
}

// The ways a schema reaches the grammar compiler.
std::vector<std::pair<std::string, HttpRequest>> schema_routes(const std::string& label, const json& schema) {
  std::vector<std::pair<std::string, HttpRequest>> out;
  out.emplace_back(label + " via response_format",
                   post("/v1/chat/completions",
                        chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", schema}}}}}}).dump()));
  out.emplace_back(label + " via /v1/responses text.format",
                   post("/v1/responses", json{{"model", kModel},
                                              {"input", "hi"},
                                              {"max_output_tokens", 2},
                                              {"text", {{"format", {{"type", "json_schema"}, {"name", "x"}, {"schema", schema}}}}}}
                                             .dump()));
  out.emplace_back(label + " via tool_choice required",
                   post("/v1/chat/completions", chat({{"tools", json::array({tool(schema)})}, {"tool_choice", "required"}}).dump()));
  return out;
}

// Tool-call arguments nested `depth` deep, through every route that parses them.
std::vector<std::pair<std::string, HttpRequest>> nested_argument_routes(std::size_t depth) {
  const std::string args = std::string(depth, '[') + std::string(depth, ']');
  const json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args}}}};
  const json messages = json::array({user("hi"), {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
                                     {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "ok"}}});
  const std::string n = std::to_string(depth);
  std::vector<std::pair<std::string, HttpRequest>> out;
  out.emplace_back("arguments nested " + n + " in chat messages",
                   post("/v1/chat/completions", chat({{"messages", messages}}).dump()));
  out.emplace_back("arguments nested " + n + " in /tokenize messages",
                   post("/tokenize", json{{"model", kModel}, {"messages", messages}}.dump()));
  out.emplace_back("arguments nested " + n + " in /v1/responses function_call",
                   post("/v1/responses", json{{"model", kModel},
                                              {"max_output_tokens", 2},
                                              {"input", json::array({{{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}, {"arguments", args}},
                                                                     {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "ok"}}})}}
                                             .dump()));
  return out;
}

std::string many_keys(std::size_t n) {
  std::string keys = "{";
  for (std::size_t i = 0; i < n; ++i) keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"v\"";
  return keys + "}";
}

// A prompt of `bytes` bytes: words, or one run with no space (a single pre-tokenizer word).
std::string long_text(std::size_t bytes, bool words) {
  std::string s;
  s.reserve(bytes);
  while (s.size() < bytes) s += words ? "the quick brown fox jumps over the lazy dog " : "abcdefghij";
  s.resize(bytes);
  return s;
}

class ServingLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    const auto tpl = dir_->write("tools.jinja", kToolsTemplate);
    std::string why;
    host_ = HostProcess::start(with_tiny_random_model({"--chat-template", std::string(kModel) + "=" + tpl.string()}), {}, &why);
    ASSERT_TRUE(host_) << why;
    // Warm: a few ordinary requests of each kind, then the baseline.
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(http(host_->port(), post("/v1/chat/completions", chat().dump())).status, 200) << host_->log();
      ASSERT_EQ(http(host_->port(), post("/tokenize", json{{"model", kModel}, {"prompt", long_text(100000, true)}}.dump())).status, 200);
      ASSERT_EQ(http(host_->port(),
                     post("/v1/chat/completions", chat({{"response_format", {{"type", "json_object"}}}}).dump()))
                    .status,
                200);
    }
    baseline_kb_ = rss_kb(host_->pid());
    ASSERT_GT(baseline_kb_, 0);
  }

  // Sends `request` and expects a 4xx in the route's error shape within the time bound,
  // the server alive and its memory within the margin.
  void expect_refused(const std::string& label, const HttpRequest& request, int want_status = 0) {
    SCOPED_TRACE(label);
    const auto t = Clock::now();
    HttpResponse res;
    try {
      res = http(host_->port(), request, 30000);
    } catch (const std::exception& e) {
      FAIL() << "no answer (" << e.what() << ")\n" << host_->log();
    }
    const double took = std::chrono::duration<double>(Clock::now() - t).count();
    std::cout << label << ": " << res.status << " in " << took * 1000 << " ms, RSS +"
              << (rss_kb(host_->pid()) - baseline_kb_) / 1024 << " MB\n";
    EXPECT_GE(res.status, 400) << res.body.substr(0, 300);
    EXPECT_LT(res.status, 500) << res.body.substr(0, 300);
    if (want_status) EXPECT_EQ(res.status, want_status) << res.body.substr(0, 300);
    if (request.path.rfind("/v1/messages", 0) == 0) EXPECT_TRUE(is_anthropic_error(res.content_type, res.body));
    else EXPECT_TRUE(is_any_openai_error(res.content_type, res.body)) << res.body.substr(0, 300);
    EXPECT_LT(took, kMaxSeconds) << res.body.substr(0, 300);
    EXPECT_EQ(http(host_->port(), get("/health")).status, 200) << host_->log();
    EXPECT_LT(rss_kb(host_->pid()) - baseline_kb_, kMaxGrowthKb);
  }

  std::string error_param(const HttpRequest& request) {
    const HttpResponse res = http(host_->port(), request, 30000);
    const json body = json::parse(res.body, nullptr, false);
    if (!body.is_object() || !body.contains("error") || !body["error"].contains("param")) return "?";
    return body["error"]["param"].is_string() ? body["error"]["param"].get<std::string>() : "null";
  }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<HostProcess> host_;
  long baseline_kb_ = 0;
};

TEST_F(ServingLimits, RefChainsAreRefused) {
  for (int links : {6000, 12000, 60000})
    for (const auto& [label, request] : schema_routes("$ref chain of " + std::to_string(links), ref_chain(links)))
      expect_refused(label, request, 400);
}

TEST_F(ServingLimits, SelfReferentialSchemasAreRefusedAsInvalid) {
  for (const char* schema : {R"({"$ref":"#"})", R"({"anyOf":[{"$ref":"#"}]})", R"({"allOf":[{"$ref":"#"}]})",
                             R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"})
    for (const auto& [label, request] : schema_routes(schema, json::parse(schema))) expect_refused(label, request, 400);
}

TEST_F(ServingLimits, SchemasThatMultiplyOutAreRefusedBeforeExpansion) {
  for (int n : {1000, 4096, 8192, 40960})
    for (const auto& [label, request] : schema_routes(std::to_string(n) + " x " + std::to_string(n) + " minItems", square(n)))
      expect_refused(label, request, 400);
  const auto [label, request] = schema_routes("4096 x 4096", square(4096)).front();
  EXPECT_EQ(error_param(request), "response_format.json_schema.schema");
}

TEST_F(ServingLimits, NestingInsideParsedStringsIsRefusedNamingTheField) {
  for (std::size_t depth : {65u, 100000u, 200000u, 1000000u})
    for (const auto& [label, request] : nested_argument_routes(depth)) expect_refused(label, request, 400);
  EXPECT_EQ(error_param(nested_argument_routes(100000)[0].second), "messages[1].tool_calls[0].function.arguments");
  // Within the limit the same arguments are taken.
  EXPECT_EQ(http(host_->port(), nested_argument_routes(60)[0].second).status, 200);
  // Nesting in the body itself, and in an Anthropic tool_use input (an object in the body).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_refused("nesting in the body", post("/v1/chat/completions", "{\"metadata\":" + deep + "}"), 400);
  HttpRequest m = post("/v1/messages", json{{"model", kModel}, {"max_tokens", 2}, {"messages", json::array({user("hi")})}}.dump());
  m.body = m.body->substr(0, m.body->size() - 1) + ",\"metadata\":{\"x\":" + deep + "}}";
  expect_refused("nesting in a /v1/messages body", m, 400);
  expect_refused("nesting in /v1/messages/count_tokens", post("/v1/messages/count_tokens", *m.body), 400);
}

TEST_F(ServingLimits, ObjectsWithManyKeysAreRefusedInLinearTime) {
  for (std::size_t n : {10001u, 400000u}) {
    const std::string body = chat().dump();
    expect_refused(std::to_string(n) + " keys of metadata",
                   post("/v1/chat/completions", body.substr(0, body.size() - 1) + ",\"metadata\":" + many_keys(n) + "}"), 400);
  }
  expect_refused("800000 keys (past the body limit)",
                 post("/v1/chat/completions", "{\"metadata\":" + many_keys(800000) + "}"), 413);
  const std::string body = chat().dump();
  EXPECT_EQ(error_param(post("/v1/chat/completions", body.substr(0, body.size() - 1) + ",\"metadata\":" + many_keys(400000) + "}")),
            "metadata");
}

TEST_F(ServingLimits, PromptsPastTheContextCostAContextNotTheirLength) {
  for (bool words : {true, false}) {
    const std::string kind = words ? "words" : "one word";
    expect_refused("7 MB prompt of " + kind,
                   post("/v1/chat/completions", chat({{"messages", json::array({user(long_text(7u << 20, words))})}}).dump()), 400);
    expect_refused("7 MB /v1/completions prompt of " + kind,
                   post("/v1/completions", json{{"model", kModel}, {"prompt", long_text(7u << 20, words)}, {"max_tokens", 2}}.dump()),
                   400);
    expect_refused("14 MB prompt of " + kind,
                   post("/v1/chat/completions", chat({{"messages", json::array({user(long_text(14u << 20, words))})}}).dump()), 413);
  }
  // /tokenize counts every token of a long text (a 200, not a refusal) and gives the memory
  // back: a 4 MB word once left its BPE symbols (64 MB) in the worker thread, and glibc's
  // defaults ~11 MB in each arena a request touched -- bounded tighter here than the 200 MB
  // margin, since on a 2-core machine glibc opens at most 16 arenas.
  const long before = rss_kb(host_->pid());
  for (int i = 0; i < 8; ++i) {
    const auto t = Clock::now();
    const HttpResponse r = http(host_->port(), post("/tokenize", json{{"model", kModel}, {"prompt", long_text(4u << 20, false)}}.dump()), 30000);
    EXPECT_EQ(r.status, 200);
    std::cout << "/tokenize of a 4 MB word: " << std::chrono::duration<double>(Clock::now() - t).count() * 1000 << " ms, RSS +"
              << (rss_kb(host_->pid()) - baseline_kb_) / 1024 << " MB\n";
  }
  EXPECT_LT(rss_kb(host_->pid()) - before, 50 * 1024);
  EXPECT_LT(rss_kb(host_->pid()) - baseline_kb_, kMaxGrowthKb);
  // 100 over-context prompts in a row, spread over the default worker threads.
  const std::string prompt = chat({{"messages", json::array({user(long_text(7u << 20, true))})}}).dump();
  for (int i = 0; i < 100; ++i) {
    const HttpResponse r = http(host_->port(), post("/v1/chat/completions", prompt), 30000);
    ASSERT_EQ(r.status, 400) << r.body.substr(0, 300);
  }
  const long growth = rss_kb(host_->pid()) - baseline_kb_;
  std::cout << "after 100 x 7 MB over-context prompts: RSS +" << growth / 1024 << " MB\n";
  EXPECT_LT(growth, kMaxGrowthKb);
}

TEST_F(ServingLimits, InformationalFindings) {
  // A header value of exactly 8192 bytes is within the limit; 8193 is over.
  HttpRequest ok = post("/v1/chat/completions", chat().dump());
  ok.headers["X-Long"] = std::string(8192, 'v');
  EXPECT_EQ(http(host_->port(), ok).status, 200);
  HttpRequest over = ok;
  over.headers["X-Long"] = std::string(8193, 'v');
  EXPECT_EQ(http(host_->port(), over).status, 431);
  // logit_bias keys are canonical decimal token ids.
  for (const char* key : {"01", "+1", "1.0", " 1"})
    expect_refused(std::string("logit_bias key '") + key + "'",
                   post("/v1/chat/completions", chat({{"logit_bias", {{key, 1}}}}).dump()), 400);
  EXPECT_EQ(http(host_->port(), post("/v1/chat/completions", chat({{"logit_bias", {{"0", 1}, {"10", -1}}}}).dump())).status, 200);
  // A chunk announced past the body limit is refused at its size line, not after its data.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(host_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n10000000\r\n{\"model\":";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  const auto t = Clock::now();
  std::string got;
  pollfd p{fd, POLLIN, 0};
  while (got.find("\r\n\r\n") == std::string::npos && ::poll(&p, 1, 2000) > 0) {
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t).count(), kMaxSeconds);
}

}  // namespace
}  // namespace memra::server::testing
