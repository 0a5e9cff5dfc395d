#include "host/server/request_validation.hpp"

#include <gtest/gtest.h>

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
                  {"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"42"}]})");
  ASSERT_TRUE(v.request) << v.error->message;
  EXPECT_EQ(v.request->model, "m");
  EXPECT_TRUE(v.request->stream);
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

TEST(ServerValidation, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(CompletionKind::chat, {deep, "invalid_json", ""});
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[","b":[{}]})", 64), 3u);  // brackets in strings do not count
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[","b":1})", 64), 1u);
}

TEST(ServerValidation, InvalidUtf8IsInvalidJson) {
  expect_error(CompletionKind::chat, {"{\"model\":\"\xff\xfe\"}", "invalid_json", ""});
}

}  // namespace
}  // namespace memra::server
