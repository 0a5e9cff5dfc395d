// The Responses and Messages event streams as state machines: blocks / items open and
// close in order around thinking, text and tool calls, and a failure after the stream
// began ends it with the API's own error event.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "host/server/messages_format.hpp"
#include "host/server/openai_format.hpp"
#include "host/server/responses_format.hpp"

namespace memra::server {
namespace {

using json = nlohmann::json;

struct Event {
  std::string name;
  json data;
};

std::vector<Event> events(const std::string& sse) {
  std::vector<Event> out;
  std::size_t at = 0;
  while ((at = sse.find("event: ", at)) != std::string::npos) {
    const auto nl = sse.find('\n', at);
    const auto data = sse.find("data: ", nl);
    const auto end = sse.find("\n\n", data);
    out.push_back({sse.substr(at + 7, nl - at - 7), json::parse(sse.substr(data + 6, end - data - 6))});
    at = end;
  }
  return out;
}

std::vector<std::string> names(const std::vector<Event>& e) {
  std::vector<std::string> out;
  for (const auto& x : e) out.push_back(x.name);
  return out;
}

ChatPieces pieces(std::string reasoning, std::string content, std::vector<ToolCallOut> calls = {}) {
  return ChatPieces{std::move(reasoning), std::move(content), std::move(calls)};
}

TEST(ServerApiStreams, ResponsesItemsOpenAndCloseInOrderWithSequenceNumbers) {
  ResponseHead head{"resp_1", 1, "m", json::object()};
  ChoiceResult stored;
  std::string stored_response;
  auto f = responses_stream(head, [&](const ChoiceResult& a, const std::string& r) {
    stored = a;
    stored_response = r;
  });
  StartedCompletion unused;
  std::string sse = f->open(unused);
  ChoiceDelta d;
  ChatPieces p = pieces("hmm", "");
  sse += f->news(d, &p, std::nullopt);
  p = pieces(" more", "Hi");
  sse += f->news(d, &p, std::nullopt);
  p = pieces("", "", {{0, "call_1", "f", "{\"a\":1}"}});
  sse += f->news(d, &p, std::string("tool_calls"));
  UsageCounts u;
  u.prompt = 5;
  u.completion = 7;
  sse += f->close(u);
  const auto e = events(sse);
  EXPECT_EQ(names(e), (std::vector<std::string>{
                          "response.created", "response.in_progress", "response.output_item.added",
                          "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
                          "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                          "response.output_item.added", "response.content_part.added", "response.output_text.delta",
                          "response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.output_item.added", "response.function_call_arguments.delta",
                          "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(e[i].data["sequence_number"], i);
    EXPECT_EQ(e[i].data["type"], e[i].name);
  }
  const json& done = e.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "hmm more");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hi");
  EXPECT_EQ(done["output"][2]["call_id"], "call_1");
  EXPECT_EQ(e[16].data["output_index"], 2);
  EXPECT_EQ(done["usage"]["total_tokens"], 12);
  EXPECT_EQ(stored.text, "Hi");
  EXPECT_EQ(stored.tool_calls.size(), 1u);
  EXPECT_EQ(json::parse(stored_response), done);  // what GET /v1/responses/{id} answers: the completed Response
}

TEST(ServerApiStreams, AResponsesFailureEndsWithResponseFailed) {
  auto f = responses_stream(ResponseHead{"resp_2", 1, "m", json::object()}, nullptr);
  StartedCompletion unused;
  std::string sse = f->open(unused);
  ChoiceDelta d;
  ChatPieces p = pieces("", "partial");
  sse += f->news(d, &p, std::nullopt);
  sse += f->failed(errors::shutting_down());
  const auto e = events(sse);
  EXPECT_EQ(e.back().name, "response.failed");
  EXPECT_EQ(e.back().data["response"]["status"], "failed");
  EXPECT_FALSE(e.back().data["response"]["error"]["message"].get<std::string>().empty());
  EXPECT_EQ(e[e.size() - 2].name, "response.output_item.done");  // the open message is closed first
}

TEST(ServerApiStreams, MessagesBlocksAndTheAnthropicErrorEvent) {
  auto f = messages_stream();
  ChoiceDelta d;
  ChatPieces p = pieces("think", "");
  std::string sse = f->news(d, &p, std::nullopt);
  p = pieces("", "Hello");
  sse += f->news(d, &p, std::nullopt);
  p = pieces("", "", {{0, "call_9", "f", "{\"a\":1}"}});
  d.stop_sequence = std::nullopt;
  sse += f->news(d, &p, std::string("tool_calls"));
  UsageCounts u;
  u.prompt = 10;
  u.cached = 4;
  u.completion = 3;
  sse += f->close(u);
  const auto e = events(sse);
  EXPECT_EQ(names(e), (std::vector<std::string>{"content_block_start", "content_block_delta", "content_block_stop",
                                                "content_block_start", "content_block_delta", "content_block_stop",
                                                "content_block_start", "content_block_delta", "content_block_stop",
                                                "message_delta", "message_stop"}));
  EXPECT_EQ(e[0].data["content_block"]["type"], "thinking");
  EXPECT_EQ(e[1].data["delta"]["type"], "thinking_delta");
  EXPECT_EQ(e[4].data["delta"]["text"], "Hello");
  EXPECT_EQ(e[6].data["content_block"]["id"], "toolu_9");
  EXPECT_EQ(e[7].data["delta"]["partial_json"], "{\"a\":1}");
  EXPECT_EQ(e[8].data["index"], 2);
  EXPECT_EQ(e[9].data["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(e[9].data["usage"]["input_tokens"], 6);
  EXPECT_EQ(e[9].data["usage"]["cache_read_input_tokens"], 4);

  auto g = messages_stream();
  p = pieces("", "par");
  std::string cut = g->news(ChoiceDelta{}, &p, std::nullopt);
  cut += g->failed(errors::shutting_down());
  const auto c = events(cut);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[2].name, "content_block_stop");
  EXPECT_EQ(c[3].name, "error");
  EXPECT_EQ(c[3].data["type"], "error");
  EXPECT_EQ(c[3].data["error"]["type"], "overloaded_error");
}

TEST(ServerApiStreams, AnthropicErrorBodiesFollowTheStatus) {
  const json bad = json::parse(anthropic_error_body(errors::invalid_request("invalid_value", "too big", std::string("max_tokens"))));
  EXPECT_EQ(bad, json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"},"request_id":null})"));
  EXPECT_EQ(json::parse(anthropic_error_body(errors::internal("x"), std::string("req-7")))["request_id"], "req-7");
  EXPECT_EQ(json::parse(anthropic_error_body(errors::invalid_api_key()))["error"]["type"], "authentication_error");
  EXPECT_EQ(json::parse(anthropic_error_body(errors::model_not_found("x")))["error"]["type"], "not_found_error");
  EXPECT_EQ(json::parse(anthropic_error_body(errors::tenant_rate_limited("t", "full")))["error"]["type"], "rate_limit_error");
  EXPECT_EQ(json::parse(anthropic_error_body(errors::internal("x")))["error"]["type"], "api_error");
  EXPECT_EQ(json::parse(anthropic_error_body(errors::body_too_large(1, "is over")))["error"]["type"], "request_too_large");
}

// A call streamed in pieces: its head (index, id, name), then its arguments' parts, then its end.
std::vector<ToolCallOut> call_in_pieces(std::size_t index, const std::string& id, bool cut = false) {
  ToolCallOut head{index, id, "get_weather", "", true, false, false};
  ToolCallOut part = head, last = head;
  part.begins = last.begins = false;
  part.arguments = "{\"city\":";
  last.arguments = "\"Par";
  last.ends = true;
  last.cut = cut;
  return {head, part, last};
}

TEST(ServerApiStreams, OpenAiChunksStreamACallAsOpenAiDoes) {
  ResponseMeta meta;
  meta.id = "chatcmpl-1";
  meta.model = "m";
  ChoiceDelta d;
  d.tokens.resize(3);  // tokens whose text went into the call: no content chunk for them
  std::string sse;
  for (const auto& piece : call_in_pieces(0, "call_a")) {
    ChatDeltaExtras extras{"", {piece}};
    sse += delta_event(meta, d, "", 0, false, &extras);
  }
  d.finish_reason = "length";
  ChatDeltaExtras none;
  sse += delta_event(meta, d, "", 0, false, &none);
  std::vector<json> chunks;
  for (std::size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos; at += 6)
    chunks.push_back(json::parse(sse.substr(at + 6, sse.find("\n\n", at) - at - 6)));
  ASSERT_EQ(chunks.size(), 4u) << sse;
  const json first = chunks[0]["choices"][0]["delta"];
  EXPECT_FALSE(first.contains("content"));
  EXPECT_EQ(first["tool_calls"][0], json::parse(R"({"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}})"));
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["tool_calls"][0], json::parse(R"({"index":0,"function":{"arguments":"{\"city\":"}})"));
  EXPECT_EQ(chunks[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "\"Par");
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[3]["choices"][0]["delta"], json::object());
}

TEST(ServerApiStreams, ResponsesAndMessagesStreamACallInPieces) {
  auto f = responses_stream(ResponseHead{"resp_3", 1, "m", json::object()}, nullptr);
  StartedCompletion unused;
  std::string sse = f->open(unused);
  ChoiceDelta d;
  const auto parts = call_in_pieces(0, "call_b", /*cut=*/true);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    ChatPieces p = pieces("", "", {parts[i]});
    sse += f->news(d, &p, i + 1 == parts.size() ? std::optional<std::string>("length") : std::nullopt);
  }
  sse += f->close(UsageCounts{});
  auto e = events(sse);
  EXPECT_EQ(names(e), (std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                                "response.function_call_arguments.delta",
                                                "response.function_call_arguments.delta",
                                                "response.function_call_arguments.done", "response.output_item.done",
                                                "response.incomplete"}));
  EXPECT_EQ(e[2].data["item"]["arguments"], "");
  EXPECT_EQ(e[2].data["item"]["name"], "get_weather");
  EXPECT_EQ(e[5].data["arguments"], "{\"city\":\"Par");
  EXPECT_EQ(e[6].data["item"]["status"], "incomplete");
  EXPECT_EQ(e[6].data["item"]["call_id"], "call_b");

  auto g = messages_stream();
  sse.clear();
  for (const auto& part : call_in_pieces(0, "call_c")) {
    ChatPieces p = pieces("", "", {part});
    sse += g->news(d, &p, std::nullopt);
  }
  e = events(sse);
  EXPECT_EQ(names(e), (std::vector<std::string>{"content_block_start", "content_block_delta", "content_block_delta",
                                                "content_block_stop"}));
  EXPECT_EQ(e[0].data["content_block"]["type"], "tool_use");
  EXPECT_EQ(e[0].data["content_block"]["input"], json::object());
  EXPECT_EQ(e[1].data["delta"]["partial_json"], "{\"city\":");
  EXPECT_EQ(e[2].data["delta"]["partial_json"], "\"Par");
}

}  // namespace
}  // namespace memra::server
