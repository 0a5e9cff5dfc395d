// Malformed input, in bulk: broken JSON, every field with wrong types and absurd
// values, huge numbers and bodies, invalid UTF-8, unknown models, wrong content
// types and methods, bad messages and roles, too many stops. Every answer must
// be a client error (or a success for inputs that happen to be valid) in the
// OpenAI error shape -- never a 5xx, never a crash: /health still answers.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "../server/error_shape.hpp"
#include "serving_client.hpp"

namespace memra::server::testing {
namespace {

using nlohmann::json;

constexpr const char* kModel = "memra-tiny-random";
constexpr int kBodyLimit = 1 << 20;

struct Case {
  std::string label;
  HttpRequest request;
};

HttpRequest raw(const std::string& path, std::string body, std::string content_type = "application/json") {
  HttpRequest r = post(path, std::move(body));
  r.content_type = std::move(content_type);
  return r;
}

json chat_base() {
  return {{"model", kModel}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}, {"max_tokens", 2}};
}
json text_base() { return {{"model", kModel}, {"prompt", "hi"}, {"max_tokens", 2}}; }
json responses_base() { return {{"model", kModel}, {"input", "hi"}, {"max_output_tokens", 2}}; }
json messages_base() {
  return {{"model", kModel}, {"max_tokens", 2}, {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})}};
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string label, HttpRequest r) { out.push_back({std::move(label), std::move(r)}); };

  // Every field with wrong types and absurd values (some happen to be valid: fine, if answered).
  const std::vector<std::pair<std::string, std::string>> values = {
      {"str", R"("x")"},        {"empty", R"("")"},     {"neg", "-1"},       {"zero", "0"},
      {"frac", "1.5"},          {"huge", "1e308"},      {"-huge", "-1e308"}, {"u64max", "18446744073709551615"},
      {"i64min", "-9223372036854775808"}, {"true", "true"}, {"array", R"([1,"a",null])"}, {"object", R"({"a":{}})"},
      {"nul", R"("\u0000")"},   {"long", "\"" + std::string(5000, 'z') + "\""}, {"tiny", "1e-320"},
  };
  const std::vector<std::string> chat_fields = {
      "model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options", "stop", "temperature",
      "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "seed", "n",
      "logprobs", "top_logprobs", "user", "cache_salt", "ignore_eos", "metadata", "store", "tools", "tool_choice",
      "response_format", "logit_bias", "chat_template_kwargs", "reasoning_effort", "parallel_tool_calls", "bogus_field"};
  const std::vector<std::string> text_fields = {
      "model", "prompt", "max_tokens", "stream", "stop", "temperature", "top_p", "top_k", "seed", "n", "logprobs",
      "echo", "best_of", "suffix", "logit_bias", "user", "cache_salt", "messages"};
  const std::vector<std::string> responses_fields = {
      "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens",
      "temperature", "top_p", "text", "stream", "previous_response_id", "store", "reasoning", "user", "seed",
      "metadata", "truncation", "include", "background", "stream_options", "bogus_field"};
  const std::vector<std::string> messages_fields = {
      "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k",
      "tools", "tool_choice", "thinking", "metadata", "service_tier", "container", "bogus_field"};
  for (const auto& [route, base, fields] :
       {std::tuple{std::string("/v1/chat/completions"), chat_base(), chat_fields},
        std::tuple{std::string("/v1/completions"), text_base(), text_fields},
        std::tuple{std::string("/v1/responses"), responses_base(), responses_fields},
        std::tuple{std::string("/v1/messages"), messages_base(), messages_fields}}) {
    for (const auto& field : fields) {
      for (const auto& [name, value] : values) {
        json body = base;
        body.erase(field);
        std::string text = body.dump();
        text.insert(text.size() - 1, ",\"" + field + "\":" + value);
        add(route + " " + field + "=" + name, raw(route, text));
      }
    }
  }

  // Broken JSON: every truncation of a valid body, and byte-level damage.
  const std::string good = chat_base().dump();
  for (std::size_t n = 0; n < good.size(); n += 2) add("truncated at " + std::to_string(n), raw("/v1/chat/completions", good.substr(0, n)));
  for (const std::string& bad :
       {std::string("{\"model\":\"\xff\"}"), std::string("{\"model\":\"\xc3\x28\"}"), std::string("{\"model\":\"\xc0\xaf\"}"),
        std::string("{\"model\":\"\xed\xa0\x80\"}"), std::string(R"({"model":"m","temperature":NaN})"),
        std::string(R"({"model":"m","temperature":Infinity})"), std::string(R"({"model":"m",})"),
        std::string(R"({'model':'m'})"), std::string(R"({"model":"m"} // comment)"), std::string(R"({}{})"),
        std::string("\x00\x01\x02", 3), std::string(R"({"model":"\ud800"})"), std::string(R"([{"model":"m"}])"),
        std::string("null"), std::string("42"), std::string(100000, '['), std::string(R"({"model":)") + std::string(70, '[')}) {
    add("damaged json", raw("/v1/chat/completions", bad));
    add("damaged json", raw("/v1/completions", bad));
    add("damaged json", raw("/tokenize", bad));
    add("damaged json", raw("/v1/responses", bad));
    add("damaged json", raw("/v1/messages", bad));
  }
  // Invalid UTF-8 inside otherwise good requests.
  add("bad utf8 content", raw("/v1/chat/completions",
                              R"({"model":"memra-tiny-random","messages":[{"role":"user","content":")" + std::string("\xfe\xff") + R"("}]})"));
  add("bad utf8 prompt", raw("/v1/completions", R"({"model":"memra-tiny-random","prompt":")" + std::string("\x80\x80") + R"("})"));

  // Huge bodies and shapes.
  {
    // Declared over the limit: the server answers 413 before reading (and closes), so nothing is sent.
    HttpRequest r = raw("/v1/chat/completions", "");
    r.body.reset();
    r.declared_length = kBodyLimit + 10;
    add("body over the limit", r);
  }
  {
    HttpRequest r = raw("/v1/completions", std::string(kBodyLimit * 2, 'x'));
    r.chunked = true;
    add("chunked body over the limit", r);
  }
  add("prompt far over the context", raw("/v1/completions", json{{"model", kModel}, {"prompt", std::string(600000, 'a')}}.dump()));
  {
    json many = chat_base();
    many["messages"] = json::array();
    for (int i = 0; i < 5000; ++i) many["messages"].push_back({{"role", "user"}, {"content", "x"}});
    add("too many messages", raw("/v1/chat/completions", many.dump()));
  }
  {
    json prompts = text_base();
    prompts["prompt"] = json::array();
    for (int i = 0; i < 100; ++i) prompts["prompt"].push_back("p");
    add("too many prompts", raw("/v1/completions", prompts.dump()));
  }

  // Content types and methods.
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                           "application/xml", "%%%", "application/jsonx"}) {
    add(std::string("content type ") + type, raw("/v1/chat/completions", chat_base().dump(), type));
  }
  for (const char* method : {"PUT", "DELETE", "PATCH", "GET"}) {
    HttpRequest r = raw("/v1/chat/completions", chat_base().dump());
    r.method = method;
    add(std::string("method ") + method, r);
  }
  add("GET /tokenize", get("/tokenize"));
  add("embeddings of a generation model", raw("/v1/embeddings", R"({"model":"memra-tiny-random","input":"x"})"));

  // Models, n, max_tokens.
  for (const std::string& model : {std::string("nope"), std::string("MEMRA-TINY-RANDOM"), std::string(" memra-tiny-random"),
                                  std::string("memra-tiny-random\0", 18)}) {
    json b = chat_base();
    b["model"] = model;
    add("unknown model " + model, raw("/v1/chat/completions", b.dump()));
  }
  for (const std::string n : {"1000000000", "-5", "17", "0"}) {
    std::string b = chat_base().dump();
    b.insert(b.size() - 1, ",\"n\":" + n);
    add("n=" + n, raw("/v1/chat/completions", b));
  }
  for (const std::string m : {"1000000000000", "4096", "9223372036854775807"}) {
    std::string b = chat_base().dump();
    b.erase(b.find("\"max_tokens\":2"), std::string("\"max_tokens\":2").size());
    b.insert(b.size() - 1, "\"max_tokens\":" + m);
    add("max_tokens=" + m, raw("/v1/chat/completions", b));
  }

  // Messages and roles.
  for (const std::string& messages :
       {std::string(R"([{"role":"robot","content":"x"}])"), std::string(R"([{"role":5,"content":"x"}])"),
        std::string(R"([{"content":"x"}])"), std::string(R"([{"role":"user","content":5}])"),
        std::string(R"([{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"text","text":5}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"input_audio"}]}])"), std::string(R"(["hello"])"),
        std::string(R"([[{"role":"user","content":"x"}]])"), std::string(R"({"role":"user","content":"x"})"),
        std::string(R"([{"role":"assistant","content":null,"tool_calls":[{"id":"t"}]}])"),
        std::string(R"([{"role":"user"}])"), std::string(R"([])"), std::string(R"("hi")"),
        std::string(R"([{"role":"user","content":"x","extra":1}])")}) {
    add("messages " + messages, raw("/v1/chat/completions",
                                    R"({"model":"memra-tiny-random","max_tokens":2,"messages":)" + messages + "}"));
  }

  // Responses input items and previous_response_id.
  for (const std::string& input :
       {std::string(R"([{"type":"function_call","call_id":"c","name":"f"}])"),
        std::string(R"([{"type":"function_call_output","call_id":"nope","output":"x"}])"),
        std::string(R"([{"type":"function_call_output","call_id":"c","output":5}])"),
        std::string(R"([{"type":"item_reference","id":"x"}])"), std::string(R"([{"role":"tool","content":"x"}])"),
        std::string(R"([{"role":"user","content":[{"type":"input_file","file_id":"f"}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"input_text"}]}])"), std::string(R"([{"type":5}])"),
        std::string(R"([{"type":"reasoning","encrypted_content":"x"}])"), std::string(R"([])"), std::string(R"([[]])")}) {
    add("responses input " + input, raw("/v1/responses", R"({"model":"memra-tiny-random","max_output_tokens":2,"input":)" + input + "}"));
  }
  for (const std::string& id : {std::string(R"("resp_unknown")"), std::string(R"("")"), std::string("5")}) {
    add("previous_response_id " + id,
        raw("/v1/responses", R"({"model":"memra-tiny-random","input":"x","previous_response_id":)" + id + "}"));
  }
  // Messages content blocks, tools and choices.
  for (const std::string& messages :
       {std::string(R"([{"role":"system","content":"x"}])"), std::string(R"([{"role":"user","content":[{"type":"image","source":{}}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope"}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}])"),
        std::string(R"([{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"x"}]}])"),
        std::string(R"([{"role":"user","content":[{"type":"text"}]}])"), std::string(R"([{"role":"user","content":[5]}])"),
        std::string(R"([{"role":"user"}])"), std::string(R"([])"), std::string(R"("hi")")}) {
    add("messages " + messages, raw("/v1/messages", R"({"model":"memra-tiny-random","max_tokens":2,"messages":)" + messages + "}"));
  }
  for (const std::string& extra :
       {std::string(R"("tools":[{"name":"f"}])"), std::string(R"("tools":[{"name":"f","input_schema":{"type":"array"}}])"),
        std::string(R"("tools":[{"type":"bash_20250124","name":"bash"}])"), std::string(R"("tool_choice":{"type":"any"})"),
        std::string(R"("tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"})"),
        std::string(R"("thinking":{"type":"enabled","budget_tokens":1024})"), std::string(R"("stop_sequences":["a","b","c","d","e"])")}) {
    add("messages with " + extra, raw("/v1/messages", R"({"model":"memra-tiny-random","max_tokens":2,"messages":[{"role":"user","content":"x"}],)" + extra + "}"));
  }
  for (const char* method : {"GET", "PUT"}) {
    HttpRequest r = raw("/v1/messages", messages_base().dump());
    r.method = method;
    add(std::string("messages method ") + method, r);
  }
  add("messages content type", raw("/v1/messages", messages_base().dump(), "text/plain"));

  // Stops.
  for (const std::string& stop : {std::string(R"(["a","b","c","d","e"])"), std::string(R"([1])"), std::string(R"([""])"),
                                  std::string(R"([null])"), std::string(R"({"a":1})"), "\"" + std::string(300, 's') + "\""}) {
    std::string b = chat_base().dump();
    b.insert(b.size() - 1, ",\"stop\":" + stop);
    add("stop " + stop.substr(0, 20), raw("/v1/chat/completions", b));
  }

  // Token ids outside the vocabulary; tokenize/detokenize misuse.
  for (const std::string prompt : {"[5000]", "[[1],[99999]]", "[-1]", "[1.5]", "[[]]", "[2147483648]"}) {
    add("prompt ids " + prompt, raw("/v1/completions", R"({"model":"memra-tiny-random","max_tokens":2,"prompt":)" + prompt + "}"));
  }
  for (const std::string& body :
       {std::string(R"({"model":"memra-tiny-random","tokens":[-1]})"), std::string(R"({"model":"memra-tiny-random","tokens":[1e20]})"),
        std::string(R"({"model":"memra-tiny-random","tokens":[1024]})"), std::string(R"({"model":"memra-tiny-random","tokens":"abc"})"),
        std::string(R"({"model":"memra-tiny-random","tokens":[9223372036854775807]})"), std::string(R"({"model":"nope","tokens":[1]})")}) {
    add("detokenize " + body, raw("/detokenize", body));
  }
  for (const std::string& body :
       {std::string(R"({"model":"memra-tiny-random","prompt":5})"), std::string(R"({"model":"memra-tiny-random"})"),
        std::string(R"({"model":"memra-tiny-random","messages":[{"role":"x"}]})"),
        std::string(R"({"model":"memra-tiny-random","prompt":"a","add_special_tokens":"yes"})")}) {
    add("tokenize " + body, raw("/tokenize", body));
  }
  return out;
}

TEST(ServingBadInput, HundredsOfMalformedRequestsGetClientErrorsAndTheServerSurvives) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model({"--max-body-bytes", std::to_string(kBodyLimit)}), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  const std::vector<Case> all = cases();
  ASSERT_GE(all.size(), 500u);
  std::map<int, int> by_status;
  int server_errors = 0;
  for (const auto& c : all) {
    HttpResponse res;
    try {
      res = http(port, c.request, 60000);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.label << ": no answer (" << e.what() << ")\n" << host->log();
      continue;
    }
    ++by_status[res.status];
    if (res.status >= 500) {
      ++server_errors;
      ADD_FAILURE() << c.label << " -> " << res.status << " " << res.body;
    } else if (res.status >= 400 && c.request.path == "/v1/messages") {
      EXPECT_TRUE(is_anthropic_error(res.content_type, res.body)) << c.label << " -> " << res.body;
    } else if (res.status >= 400) {
      EXPECT_TRUE(is_any_openai_error(res.content_type, res.body)) << c.label << " -> " << res.body;
    } else {
      EXPECT_EQ(res.status, 200) << c.label;
      if (std::getenv("MEMRA_TEST_VERBOSE")) std::cout << "200: " << c.label << "\n";
    }
  }
  std::string summary;
  for (const auto& [status, n] : by_status) summary += std::to_string(status) + ": " + std::to_string(n) + "  ";
  std::cout << all.size() << " malformed requests -> " << summary << "\n";
  EXPECT_EQ(server_errors, 0);
  EXPECT_GE(by_status[400], 400) << summary;
  EXPECT_EQ(http(port, get("/health")).status, 200);
  const std::string metrics = scrape(port);
  for (const char* status : {"500", "503"}) {
    EXPECT_EQ(sample_sum(metrics, "memra_http_requests_total", {{"status", status}}), 0.0) << status;
  }
  EXPECT_FALSE(host->wait_exit(0)) << "memra-host exited";
}

}  // namespace
}  // namespace memra::server::testing

namespace memra::server::testing {
namespace {

// Each API refuses in its own error shape: /v1/responses OpenAI's (an unknown
// previous_response_id is OpenAI's 400 previous_response_not_found), /v1/messages
// Anthropic's, for the route's own checks and for the router's (method, media type).
TEST(ServingBadInput, ResponsesAndMessagesRefuseInTheirOwnErrorShapes) {
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model(), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  auto send = [&](HttpRequest r) { return http(port, r, 60000); };

  HttpResponse res = send(raw("/v1/responses", R"({"model":"memra-tiny-random","input":"x","previous_response_id":"resp_nope"})"));
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "previous_response_not_found", "previous_response_id")) << res.body;
  res = send(raw("/v1/responses", R"({"model":"memra-tiny-random","input":5})"));
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "invalid_type", "input")) << res.body;
  res = send(raw("/v1/responses", R"({"model":"memra-tiny-random","input":"x","max_output_tokens":0})"));
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "invalid_value", "max_output_tokens")) << res.body;
  res = send(raw("/v1/responses", R"({"model":"nope","input":"x"})"));
  EXPECT_EQ(res.status, 404);
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "model_not_found", "model")) << res.body;
  // A response stored by this tenant continues; the previous one is found.
  res = send(raw("/v1/responses", R"({"model":"memra-tiny-random","input":"x","max_output_tokens":2})"));
  ASSERT_EQ(res.status, 200) << res.body;
  const std::string id = json::parse(res.body)["id"];
  res = send(raw("/v1/responses", R"({"model":"memra-tiny-random","input":"y","max_output_tokens":2,"previous_response_id":")" + id + "\"}"));
  EXPECT_EQ(res.status, 200) << res.body;

  res = send(raw("/v1/messages", R"({"model":"memra-tiny-random","messages":[{"role":"user","content":"x"}]})"));
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(is_anthropic_error(res.content_type, res.body, "invalid_request_error")) << res.body;
  EXPECT_EQ(json::parse(res.body)["error"]["message"].get<std::string>().rfind("max_tokens: ", 0), 0u) << res.body;
  res = send(raw("/v1/messages", R"({"model":"nope","max_tokens":2,"messages":[{"role":"user","content":"x"}]})"));
  EXPECT_EQ(res.status, 404);
  EXPECT_TRUE(is_anthropic_error(res.content_type, res.body, "not_found_error")) << res.body;
  res = send(raw("/v1/messages", "{\"model\":"));
  EXPECT_EQ(res.status, 400);
  EXPECT_TRUE(is_anthropic_error(res.content_type, res.body, "invalid_request_error")) << res.body;
  res = send(raw("/v1/messages", messages_base().dump(), "text/plain"));
  EXPECT_EQ(res.status, 415);
  EXPECT_TRUE(is_anthropic_error(res.content_type, res.body, "invalid_request_error")) << res.body;
  HttpRequest get_messages = raw("/v1/messages", "");
  get_messages.method = "GET";
  get_messages.body.reset();
  res = send(get_messages);
  EXPECT_EQ(res.status, 405);
  EXPECT_TRUE(is_anthropic_error(res.content_type, res.body, "invalid_request_error")) << res.body;
  res = send(raw("/v1/messages", messages_base().dump()));
  EXPECT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(json::parse(res.body)["type"], "message") << res.body;
  EXPECT_EQ(http(port, get("/health")).status, 200);
}

}  // namespace
}  // namespace memra::server::testing
