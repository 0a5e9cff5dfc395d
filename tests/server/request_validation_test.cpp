#include "host/server/request_validation.hpp"
#include "host/server/embeddings_request.hpp"
#include "host/server/messages_request.hpp"
#include "host/server/responses_request.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>

namespace memra::server {
namespace {

struct Bad {
  std::string body, code, param;
};

void expect_error(CompletionKind kind, const Bad& c) {
  auto v = validate_completion_body(kind, c.body);
  ASSERT_TRUE(v.error) << "accepted: " << c.body;
  EXPECT_FALSE(v.request);
  EXPECT_EQ(v.error->status, 400) << c.body;
  EXPECT_EQ(v.error->code, c.code) << c.body << " -> " << v.error->message;
  EXPECT_EQ(v.error->param.value_or(""), c.param) << c.body << " -> " << v.error->message;
  EXPECT_EQ(v.error->type, "invalid_request_error");
}

TEST(ServerValidation, AcceptsWellFormedChat) {
  auto v = validate_completion_body(CompletionKind::chat, R"({"model":"m","stream":true,"temperature":0.7,
      "max_tokens":16,"stop":["\n"],"seed":null,"top_p":null,
      "messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]},
                  {"role":"assistant","content":null,"tool_calls":[]},
                  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":1}"}}]},
                  {"role":"tool","content":"42","tool_call_id":"call_1"}],
      "tools":[{"type":"function","function":{"name":"add","description":"adds","parameters":{"type":"object","properties":{"a":{"type":"integer"}}},"strict":true}}],
      "tool_choice":{"type":"function","function":{"name":"add"}},"parallel_tool_calls":false,
      "response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":true}},
      "logit_bias":{"17":-100,"5":2.5},"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"low"})");
  ASSERT_TRUE(v.request) << v.error->message;
  EXPECT_EQ(v.request->model, "m");
  EXPECT_TRUE(v.request->stream);
  const CompletionRequest& r = *v.request;
  ASSERT_EQ(r.messages[3].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[3].tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(r.messages[4].name, "add") << "a tool result takes its call's name";
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_TRUE(r.tools[0].strict);
  EXPECT_EQ(r.tool_choice.mode, ToolChoiceMode::named);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_EQ(r.response_format.type, ResponseFormatType::json_schema);
  ASSERT_EQ(r.logit_bias.size(), 2u);
  EXPECT_EQ(r.logit_bias[0].id, 5);  // ascending ids
  EXPECT_EQ(r.logit_bias[1].bias, -100.0f);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.reasoning_effort.value_or(""), "low");
}

TEST(ServerValidation, AcceptsEveryPromptForm) {
  for (const char* body : {R"({"model":"m","prompt":"hello"})", R"({"model":"m","prompt":["a","b"]})",
                           R"({"model":"m","prompt":[1,2,3]})", R"({"model":"m","prompt":[[1,2],[3]]})"}) {
    auto v = validate_completion_body(CompletionKind::text, body);
    EXPECT_TRUE(v.request) << body << " -> " << (v.error ? v.error->message : "");
  }
}

TEST(ServerValidation, ChatShapeErrorsNameTheField) {
  const std::vector<Bad> cases = {
      {"", "invalid_json", ""},
      {"   ", "invalid_json", ""},
      {"{\"model\":", "invalid_json", ""},
      {"{\"model\":\"m\",}", "invalid_json", ""},
      {"[1]", "invalid_body", ""},
      {"\"text\"", "invalid_body", ""},
      {R"({"messages":[{"role":"user","content":"x"}]})", "missing_required_parameter", "model"},
      {R"({"model":7,"messages":[{"role":"user","content":"x"}]})", "invalid_type", "model"},
      {R"({"model":"","messages":[{"role":"user","content":"x"}]})", "invalid_type", "model"},
      {R"({"model":"m"})", "missing_required_parameter", "messages"},
      {R"({"model":"m","messages":{}})", "invalid_type", "messages"},
      {R"({"model":"m","messages":[]})", "invalid_value", "messages"},
      {R"({"model":"m","messages":[3]})", "invalid_type", "messages[0]"},
      {R"({"model":"m","messages":[{"content":"x"}]})", "missing_required_parameter", "messages[0].role"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"robot","content":"x"}]})",
       "invalid_value", "messages[1].role"},
      {R"({"model":"m","messages":[{"role":"user"}]})", "missing_required_parameter", "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"user","content":5}]})", "invalid_type", "messages[0].content"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":3})", "invalid_value",
       "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "invalid_type",
       "temperature"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":0})", "invalid_value", "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", "invalid_type",
       "max_tokens"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"})", "invalid_type", "stream"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"stop":[1]})", "invalid_type", "stop"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":0})", "invalid_value", "n"},
  };
  for (const auto& c : cases) expect_error(CompletionKind::chat, c);
}

TEST(ServerValidation, CompletionShapeErrors) {
  const std::vector<Bad> cases = {
      {R"({"model":"m"})", "missing_required_parameter", "prompt"},
      {R"({"model":"m","prompt":5})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":[]})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":["a",1]})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":[-1]})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":[[]]})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":"x","echo":1})", "invalid_type", "echo"},
      {R"({"prompt":"x"})", "missing_required_parameter", "model"},
  };
  for (const auto& c : cases) expect_error(CompletionKind::text, c);
}

TEST(ServerValidation, ParsesEveryHonouredField) {
  auto v = validate_completion_body(CompletionKind::chat, R"({"model":"m","messages":[
      {"role":"developer","content":"sys"},{"role":"user","name":"bob","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
      "stream":true,"stream_options":{"include_usage":true,"future_option":1},"max_completion_tokens":9,
      "stop":["x","yy"],"temperature":0.5,"top_p":0.9,"top_k":40,"min_p":0.05,"presence_penalty":0.1,
      "frequency_penalty":-0.2,"repetition_penalty":1.1,"seed":-1,"n":3,"logprobs":true,"top_logprobs":4,
      "user":"u1","cache_salt":"s","ignore_eos":true,"metadata":{"k":"v"},"store":false,"tools":[],
      "tool_choice":"none","response_format":{"type":"text"},"logit_bias":{}})");
  ASSERT_TRUE(v.request) << v.error->message;
  const CompletionRequest& r = *v.request;
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");  // developer is the template's system
  EXPECT_EQ(r.messages[1].content.value_or(""), "a\nb");
  EXPECT_EQ(r.messages[1].name, "bob");
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.max_tokens.value_or(0), 9);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yy"}));
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_FLOAT_EQ(r.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.repetition_penalty, 1.1f);
  EXPECT_EQ(r.seed.value_or(0), UINT64_MAX);  // -1 modulo 2^64
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 4);
  EXPECT_EQ(r.cache_salt, "s");
  EXPECT_TRUE(r.ignore_eos);

  auto t = validate_completion_body(CompletionKind::text,
                                    R"({"model":"m","prompt":[[1,2],[3]],"logprobs":2,"echo":false,"best_of":2,"n":2})");
  ASSERT_TRUE(t.request) << t.error->message;
  ASSERT_EQ(t.request->prompts.size(), 2u);
  EXPECT_TRUE(t.request->prompts[0].is_tokens);
  EXPECT_EQ(t.request->prompts[1].tokens, std::vector<std::int32_t>{3});
  EXPECT_TRUE(t.request->logprobs);
  EXPECT_EQ(t.request->top_logprobs, 2);
}

TEST(ServerValidation, FieldsItCannotHonourAreRefusedByName) {
  const std::string m = R"("model":"m","messages":[{"role":"user","content":"x"}])";
  const std::vector<Bad> chat = {
      {"{" + m + R"(,"bogus":1})", "unknown_parameter", "bogus"},
      {"{" + m + R"(,"tools":[{"type":"function"}]})", "missing_required_parameter", "tools[0].function"},
      {"{" + m + R"(,"tools":[{"type":"code_interpreter","function":{"name":"f"}}]})", "invalid_value", "tools[0].type"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"a b"}}]})", "invalid_value", "tools[0].function.name"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]})", "invalid_type", "tools[0].function.parameters"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]})", "invalid_value", "tools[0].function.parameters.type"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})", "invalid_value", "tools[1].function.name"},
      {"{" + m + R"(,"tool_choice":"required"})", "invalid_value", "tool_choice"},
      {"{" + m + R"(,"tool_choice":"sometimes"})", "invalid_value", "tool_choice"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})", "invalid_value", "tool_choice"},
      {"{" + m + R"(,"response_format":{"type":"xml"}})", "invalid_value", "response_format.type"},
      {"{" + m + R"(,"response_format":{"type":"json_schema"}})", "missing_required_parameter", "response_format.json_schema"},
      {"{" + m + R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})", "missing_required_parameter", "response_format.json_schema.name"},
      {"{" + m + R"(,"response_format":{"type":"json_object"},"ignore_eos":true})", "unsupported_parameter", "ignore_eos"},
      {"{" + m + R"(,"logit_bias":{"x":10}})", "invalid_value", "logit_bias"},
      {"{" + m + R"(,"logit_bias":{"5":101}})", "invalid_value", "logit_bias.5"},
      {"{" + m + R"(,"logit_bias":[5]})", "invalid_type", "logit_bias"},
      {"{" + m + R"(,"chat_template_kwargs":{"messages":[]}})", "invalid_value", "chat_template_kwargs.messages"},
      {"{" + m + R"(,"chat_template_kwargs":"x"})", "invalid_type", "chat_template_kwargs"},
      {"{" + m + R"(,"reasoning_effort":"max"})", "invalid_value", "reasoning_effort"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"1","tool_call_id":"nope"}]})",
       "invalid_value", "messages[1].tool_call_id"},
      {R"({"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","content":"1"}]})",
       "missing_required_parameter", "messages[1].tool_call_id"},
      {"{" + m + R"(,"audio":{}})", "unsupported_parameter", "audio"},
      {"{" + m + R"(,"metadata":"x"})", "invalid_type", "metadata"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})",
       "unsupported_content_type", "messages[0].content[0].type"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})", "missing_required_parameter",
       "messages[0].content[0].text"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","colour":"red"}]})", "unknown_parameter",
       "messages[0].colour"},
      {R"({"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]})",
       "missing_required_parameter", "messages[0].tool_calls[0].function.name"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]})", "invalid_value", "messages[0].tool_calls"},
      {"{" + m + R"(,"stop":["a","b","c","d","e"]})", "invalid_value", "stop"},
      {"{" + m + R"(,"stop":""})", "invalid_value", "stop"},
      {"{" + m + R"(,"n":17})", "invalid_value", "n"},
      {"{" + m + R"(,"top_logprobs":3})", "invalid_value", "top_logprobs"},
      {"{" + m + R"(,"logprobs":true,"top_logprobs":21})", "invalid_value", "top_logprobs"},
      {"{" + m + R"(,"max_tokens":5,"max_completion_tokens":6})", "invalid_value", "max_tokens"},
      {"{" + m + R"(,"max_tokens":18446744073709551615})", "invalid_value", "max_tokens"},
      {"{" + m + R"(,"repetition_penalty":0})", "invalid_value", "repetition_penalty"},
      {"{" + m + R"(,"top_k":-2})", "invalid_value", "top_k"},
      {"{" + m + R"(,"seed":1.5})", "invalid_type", "seed"},
      {"{" + m + R"(,"stream":true,"stream_options":{"include_usage":"yes"}})", "invalid_type", "stream_options.include_usage"},
      {"{" + m + R"(,"stream_options":{"include_usage":true}})", "invalid_value", "stream_options"},
      {"{" + m + R"(,"stream":false,"stream_options":{}})", "invalid_value", "stream_options"},
  };
  for (const auto& c : chat) expect_error(CompletionKind::chat, c);
  const std::vector<Bad> text = {
      {R"({"model":"m","prompt":"x","messages":[]})", "unknown_parameter", "messages"},
      {R"({"model":"m","prompt":"x","echo":true,"logprobs":1})", "unsupported_parameter", "echo"},
      {R"({"model":"m","prompt":"x","best_of":3})", "unsupported_parameter", "best_of"},
      {R"({"model":"m","prompt":"x","suffix":"end"})", "unsupported_parameter", "suffix"},
      {R"({"model":"m","prompt":"x","logprobs":true})", "invalid_type", "logprobs"},
      {R"({"model":"m","prompt":[1,2147483648]})", "invalid_type", "prompt"},
      {R"({"model":"m","prompt":["a","b","c","d","e","f","g","h","i"],"n":8})", "invalid_value", "n"},
      {R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})", "invalid_value", "stream_options"},
  };
  for (const auto& c : text) expect_error(CompletionKind::text, c);
}

TEST(ServerValidation, TokenizeBodies) {
  auto t = parse_tokenize_body(R"({"model":"m","prompt":"hi","add_special_tokens":false})");
  ASSERT_TRUE(t.value) << t.error->message;
  EXPECT_EQ(t.value->prompt.value_or(""), "hi");
  EXPECT_EQ(t.value->add_special_tokens, std::optional<bool>(false));
  t = parse_tokenize_body(R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(t.value) << t.error->message;
  EXPECT_EQ(t.value->messages.size(), 1u);
  for (const char* bad : {R"({"model":"m"})", R"({"model":"m","prompt":"a","messages":[]})",
                          R"({"model":"m","prompt":5})", R"({"model":"m","prompt":"a","x":1})", "[]"}) {
    auto r = parse_tokenize_body(bad);
    ASSERT_TRUE(r.error) << bad;
    EXPECT_EQ(r.error->status, 400);
  }
  auto d = parse_detokenize_body(R"({"model":"m","tokens":[1,2,-3]})");
  ASSERT_TRUE(d.value) << d.error->message;
  EXPECT_EQ(d.value->tokens, (std::vector<std::int64_t>{1, 2, -3}));  // the range check needs the model
  for (const char* bad : {R"({"model":"m"})", R"({"model":"m","tokens":"1"})", R"({"model":"m","tokens":[1.5]})",
                          R"({"tokens":[1]})"}) {
    auto r = parse_detokenize_body(bad);
    ASSERT_TRUE(r.error) << bad;
    EXPECT_EQ(r.error->status, 400);
  }
}

TEST(ServerValidation, JsonPastTheLimitsIsRefusedNamingTheField) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(CompletionKind::chat, {deep, "json_limit_exceeded", ""});
  expect_error(CompletionKind::chat, {R"({"model":"m","metadata":{"a":)" + deep + "}}", "json_limit_exceeded", "metadata"});
  // Brackets in strings are text; nesting in tool-call arguments is parsed, and limited.
  auto chat_with_arguments = [](const std::string& args) {
    return R"({"model":"m","messages":[{"role":"user","content":"[[[[ {{"},{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":)" +
           nlohmann::json(args).dump() + "}}]}]}";
  };
  EXPECT_TRUE(validate_completion_body(CompletionKind::chat, chat_with_arguments(std::string(64, '[') + std::string(64, ']'))).request);
  EXPECT_TRUE(validate_completion_body(CompletionKind::chat, chat_with_arguments("not json [[[")).request);
  expect_error(CompletionKind::chat, {chat_with_arguments(deep), "json_limit_exceeded", "messages[1].tool_calls[0].function.arguments"});
  std::string keys = "{";
  for (int i = 0; i <= 10000; ++i) keys += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  expect_error(CompletionKind::chat, {R"({"model":"m","metadata":)" + keys + "}}", "json_limit_exceeded", "metadata"});
}

TEST(ServerValidation, InvalidUtf8IsInvalidJson) {
  expect_error(CompletionKind::chat, {"{\"model\":\"\xff\xfe\"}", "invalid_json", ""});
}

// docs/SERVING.md's field table is the validator's, and each policy is what the validator does.
TEST(ServerValidation, TheDocumentedFieldListIsTheValidators) {
  std::ifstream doc(std::string(MEMRA_SOURCE_ROOT) + "/docs/SERVING.md");
  ASSERT_TRUE(doc) << "docs/SERVING.md";
  std::map<std::string, std::map<std::string, std::string>> documented;  // route -> field -> policy
  const std::regex row(R"(^\| (chat|completions) \| `([a-z_]+)` \| (honoured|harmless|neutral only) \|$)");
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) documented[m[1]][m[2]] = m[3];
  }
  for (const auto& [route, kind] : {std::pair{std::string("chat"), CompletionKind::chat}, std::pair{std::string("completions"), CompletionKind::text}}) {
    std::map<std::string, std::string> actual;
    for (const auto& [f, p] : field_policies(kind)) actual[f] = p;
    EXPECT_EQ(documented[route], actual) << route << ": docs/SERVING.md \"Every field at a glance\" and the validator differ";
    const std::string base = kind == CompletionKind::chat ? R"("model":"m","messages":[{"role":"user","content":"x"}])"
                                                          : R"("model":"m","prompt":"x")";
    for (const auto& [field, policy] : actual) {
      if (field == "model" || field == "messages" || field == "prompt") continue;
      // A value no field accepts: a known field is never unknown; a neutral-only one is unsupported.
      auto v = validate_completion_body(kind, "{" + base + ",\"" + field + "\":{\"__junk__\":[1]}}");
      if (!v.error) {  // fields whose value is any object
        EXPECT_TRUE(field == "chat_template_kwargs" || field == "metadata" || field == "stream_options") << route << " " << field << " took junk";
        continue;
      }
      EXPECT_NE(v.error->code, "unknown_parameter") << route << " " << field;
      if (policy == "neutral only") {
        EXPECT_EQ(v.error->code, "unsupported_parameter") << route << " " << field;
      }
      if (policy == "harmless" && field != "metadata") {
        EXPECT_EQ(v.error->code, "invalid_type") << route << " " << field;
      }
    }
    auto bogus = validate_completion_body(kind, "{" + base + ",\"frobnicate\":1}");
    ASSERT_TRUE(bogus.error);
    EXPECT_EQ(bogus.error->code, "unknown_parameter");
  }
}

// The same for /v1/responses and /v1/messages: docs/SERVING.md's rows are the
// translators' tables, and a known field is never refused as unknown.
TEST(ServerValidation, TheDocumentedResponsesAndMessagesFieldsAreTheTranslators) {
  std::ifstream doc(std::string(MEMRA_SOURCE_ROOT) + "/docs/SERVING.md");
  ASSERT_TRUE(doc) << "docs/SERVING.md";
  std::map<std::string, std::map<std::string, std::string>> documented;
  const std::regex row(R"(^\| (responses|messages|embeddings) \| `([a-z_]+)` \| (honoured|harmless|neutral only) \|$)");
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_match(line, m, row)) documented[m[1]][m[2]] = m[3];
  }
  struct Api {
    std::string name, base;
    std::vector<std::pair<std::string, std::string>> policies;
    std::function<std::optional<ApiError>(const std::string&)> parse;
  };
  const std::vector<Api> apis = {
      {"responses", R"("model":"m","input":"x")", responses_field_policies(),
       [](const std::string& b) -> std::optional<ApiError> {
         auto p = parse_responses_body(b);
         if (p.error) return p.error;
         return responses_chat_request(*p.value, nlohmann::ordered_json::array()).error;
       }},
      {"messages", R"("model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}])", messages_field_policies(),
       [](const std::string& b) { return parse_messages_body(b).error; }},
      {"embeddings", R"("model":"m","input":"x")", embeddings_field_policies(),
       [](const std::string& b) { return parse_embeddings_body(b).error; }},
  };
  for (const auto& api : apis) {
    std::map<std::string, std::string> actual(api.policies.begin(), api.policies.end());
    EXPECT_EQ(documented[api.name], actual) << api.name << ": docs/SERVING.md \"Every field at a glance\" and the translator differ";
    EXPECT_FALSE(api.parse("{" + api.base + "}")) << api.name << ": the base body is valid";
    for (const auto& [field, policy] : actual) {
      if (field == "model" || field == "input" || field == "messages" || field == "max_tokens") continue;
      auto e = api.parse("{" + api.base + ",\"" + field + "\":{\"__junk__\":[1]}}");
      if (!e) {
        EXPECT_TRUE(field == "metadata" || field == "reasoning") << api.name << " " << field << " took junk";
        continue;
      }
      EXPECT_FALSE(e->code == "unknown_parameter" && e->param == field) << api.name << " " << field;
      if (policy == "neutral only") {
        EXPECT_EQ(e->code, "unsupported_parameter") << api.name << " " << field;
      }
    }
    auto bogus = api.parse("{" + api.base + ",\"frobnicate\":1}");
    ASSERT_TRUE(bogus);
    EXPECT_EQ(bogus->code, "unknown_parameter");
    EXPECT_EQ(bogus->param, "frobnicate");
  }
}

// Input items and content blocks become the chat turns the chat route would get.
TEST(ServerValidation, ResponsesItemsAndMessagesBlocksBecomeChatTurns) {
  auto r = parse_responses_body(R"({"model":"m","instructions":"Be brief.","input":[
    {"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
    {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}]},
    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Let me see.","annotations":[]}]},
    {"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
    {"type":"function_call","call_id":"c2","name":"g","arguments":"{\"x\":1}"},
    {"type":"function_call_output","call_id":"c2","output":"two"},
    {"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"one"}]}],
    "tools":[{"type":"function","name":"f"},{"type":"function","name":"g"}],"max_output_tokens":7})");
  ASSERT_FALSE(r.error) << r.error->message;
  Validation v = responses_chat_request(*r.value, nlohmann::ordered_json::array());
  ASSERT_FALSE(v.error) << v.error->message;
  const auto& m = v.request->messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].content, "a\nb");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Let me see.");
  EXPECT_EQ(m[2].reasoning_content, "hmm");
  ASSERT_EQ(m[2].tool_calls.size(), 2u);  // the calls join the assistant turn before them
  EXPECT_EQ(m[2].tool_calls[1].id, "c2");
  EXPECT_EQ(m[2].tool_calls[1].arguments, "{\"x\":1}");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].name, "g");
  EXPECT_EQ(m[4].content, "one");
  EXPECT_EQ(v.request->max_tokens, 7);
  EXPECT_EQ(v.request->tools.size(), 2u);
  // An output for no call is the chat check's error, named in the Responses' terms.
  auto orphan = parse_responses_body(R"({"model":"m","input":[{"type":"function_call_output","call_id":"zz","output":"x"}]})");
  ASSERT_FALSE(orphan.error);
  Validation bad = responses_chat_request(*orphan.value, nlohmann::ordered_json::array());
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->param, "input");

  auto a = parse_messages_body(R"({"model":"m","max_tokens":9,"system":[{"type":"text","text":"S"}],"stop_sequences":["END"],
    "tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},
    "messages":[{"role":"user","content":"q"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"tool_use","id":"toolu_1","name":"f","input":{"k":"v"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"r"}]},{"type":"text","text":"more"}]}]})");
  ASSERT_FALSE(a.error) << a.error->message;
  const CompletionRequest& c = a.value->chat;
  ASSERT_EQ(c.messages.size(), 5u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[2].content, std::nullopt);  // a turn of calls only
  EXPECT_EQ(c.messages[2].reasoning_content, "t");
  ASSERT_EQ(c.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(c.messages[2].tool_calls[0].arguments, R"({"k":"v"})");
  EXPECT_EQ(c.messages[3].role, "tool");
  EXPECT_EQ(c.messages[3].content, "r");
  EXPECT_EQ(c.messages[4].content, "more");
  EXPECT_EQ(c.max_tokens, 9);
  EXPECT_EQ(c.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(c.tool_choice.mode, ToolChoiceMode::required);
  EXPECT_FALSE(c.parallel_tool_calls);
  EXPECT_EQ(c.tools[0].raw.dump(), R"({"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}})");
}

}  // namespace
}  // namespace memra::server
