// memra's own error contract: errors name the line, column and construct; raise_exception is
// recognisable; runaway templates hit limits instead of exhausting the machine; the API validates input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "host/chat_template/chat_template.hpp"

namespace {

namespace ct = memra::chat_template;
using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

memra::Error compile_error(const std::string& source) {
  auto t = ct::compile(source);
  EXPECT_FALSE(t.ok()) << "compiled: " << source;
  return t ? memra::Error{} : t.error();
}

memra::Error render_error(const std::string& source, const json& context = json::object(),
                          const ct::RenderOptions& options = {}) {
  auto t = ct::compile(source);
  EXPECT_TRUE(t.ok()) << (t ? "" : t.error().message);
  if (!t) return t.error();
  auto r = t->render(context, options);
  EXPECT_FALSE(r.ok()) << "rendered: " << (r ? *r : "");
  return r ? memra::Error{} : r.error();
}

TEST(ChatTemplateErrors, UnknownFilterNamesLineColumnAndFilter) {
  const auto e = render_error("first line\n  {{ 'x' | frobnicate }}");
  EXPECT_THAT(e.message, HasSubstr("line 2, column 12"));
  EXPECT_THAT(e.message, HasSubstr("'frobnicate'"));
  EXPECT_EQ(e.code, memra::ErrorCode::unsupported);
}

TEST(ChatTemplateErrors, ColumnsCountCodePoints) {
  const auto e = render_error("é€😀{{ x|bogus }}");
  EXPECT_THAT(e.message, HasSubstr("line 1, column 9"));
}

TEST(ChatTemplateErrors, UnknownFilterInUntakenBranchIsFine) {
  auto t = ct::compile("{% if false %}{{ x|bogus }}{% endif %}ok");
  ASSERT_TRUE(t.ok());
  auto r = t->render(json::object());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "ok");
}

TEST(ChatTemplateErrors, UnclosedBlockPointsAtItsOpening) {
  const auto e = compile_error("a\n{% for m in messages %}\n  {% if m %}x{% endif %}\n");
  EXPECT_THAT(e.message, HasSubstr("line 2, column 1"));
  EXPECT_THAT(e.message, HasSubstr("{% for %} is never closed"));
  EXPECT_THAT(e.message, HasSubstr("endfor"));
}

TEST(ChatTemplateErrors, UnknownStatementIsUnsupported) {
  const auto e = compile_error("ok\n{% include 'other.jinja' %}");
  EXPECT_EQ(e.code, memra::ErrorCode::unsupported);
  EXPECT_THAT(e.message, HasSubstr("line 2"));
  EXPECT_THAT(e.message, HasSubstr("include"));
}

TEST(ChatTemplateErrors, SyntaxErrorsHavePositions) {
  EXPECT_THAT(compile_error("{{ 1 + }}").message, HasSubstr("line 1, column 8"));
  EXPECT_THAT(compile_error("{{ 'unterminated }}").message, HasSubstr("unterminated string"));
  EXPECT_THAT(compile_error("x\n{# open comment").message, HasSubstr("line 2, column 1"));
  EXPECT_THAT(compile_error("{{ a $ b }}").message, HasSubstr("'$'"));
}

TEST(ChatTemplateErrors, RaiseExceptionIsRecognisable) {
  const auto e = render_error(
      "{% for m in messages %}\n{% if m.role == 'tool' %}{{ raise_exception('no tools: ' ~ loop.index) }}{% endif %}{% "
      "endfor %}",
      json{{"messages", json::array({json{{"role", "user"}}, json{{"role", "tool"}}})}});
  EXPECT_TRUE(ct::is_raised_exception(e));
  EXPECT_EQ(e.code, memra::ErrorCode::invalid_argument);
  EXPECT_THAT(e.message, HasSubstr("line 2"));
  EXPECT_THAT(e.message, ::testing::EndsWith(": no tools: 2"));
  EXPECT_FALSE(ct::is_raised_exception(render_error("{{ 'x'|bogus }}")));
}

TEST(ChatTemplateErrors, UnknownMethodIsNamed) {
  const auto e = render_error("{{ message.content.format(1) }}", json{{"message", {{"content", "x"}}}});
  EXPECT_THAT(e.message, HasSubstr("message.content.format"));
  EXPECT_EQ(e.code, memra::ErrorCode::unsupported);
}

TEST(ChatTemplateErrors, BreakOutsideLoop) {
  EXPECT_THAT(render_error("a{% break %}").message, HasSubstr("outside a for loop"));
}

TEST(ChatTemplateLimits, RunawayRecursionStops) {
  const auto e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_THAT(e.message, HasSubstr("max_call_depth"));
}

TEST(ChatTemplateLimits, RunawayLoopStops) {
  ct::RenderOptions o;
  o.limits.max_loop_iterations = 10'000;
  const auto e =
      render_error("{% for i in range(200) %}{% for j in range(200) %}{% endfor %}{% endfor %}", json::object(), o);
  EXPECT_THAT(e.message, HasSubstr("max_loop_iterations"));
  EXPECT_THAT(render_error("{{ range(1000000000)|length }}").message, HasSubstr("max_loop_iterations"));
}

TEST(ChatTemplateLimits, RunawayOutputStops) {
  ct::RenderOptions o;
  o.limits.max_output_bytes = 1000;
  EXPECT_THAT(render_error("{% for i in range(500) %}xyz{% endfor %}", json::object(), o).message,
              HasSubstr("max_output_bytes"));
  // Doubling a string 64 times would need 2^64 bytes; the default limit stops it early.
  EXPECT_THAT(render_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                           "{% endfor %}{{ ns.s|length }}")
                  .message,
              HasSubstr("max_output_bytes"));
}

TEST(ChatTemplateLimits, DeepNestingIsASyntaxErrorNotACrash) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(compile_error(deep).message, HasSubstr("too deeply"));
  std::string blocks;
  for (int i = 0; i < 3000; ++i) blocks += "{% if true %}";
  EXPECT_THAT(compile_error(blocks).message, HasSubstr("too deeply"));
}

TEST(ChatTemplateApi, ContextMustBeAnObject) {
  auto t = ct::compile("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(json::array()).ok());
  EXPECT_FALSE(t->render_json_text("{not json").ok());
  auto r = t->render_json_text(R"({"x": [1, 2.0, "é"]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "[1, 2, \"é\"]");
}

TEST(ChatTemplateApi, ContextKeysThatShadowGlobalsAreRejected) {
  auto t = ct::compile("{{ x }}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(json{{"raise_exception", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("raise_exception"));
}

TEST(ChatTemplateApi, KeyOrderOfTheContextIsKept) {
  auto t = ct::compile("{{ tools|tojson }}");
  ASSERT_TRUE(t.ok());
  auto r = t->render_json_text(R"({"tools": [{"type": "function", "function": {"name": "f", "b": 1, "a": 2}}]})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, R"([{"type": "function", "function": {"name": "f", "b": 1, "a": 2}}])");
}

TEST(ChatTemplateApi, StrftimeNowReadsTheGivenClock) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  auto t = ct::compile("{{ strftime_now('%d %b %Y, %H:%M') }}");
  ASSERT_TRUE(t.ok());
  ct::RenderOptions o;
  o.now_unix_seconds = 1721995200;  // 2024-07-26T12:00:00Z
  auto r = t->render(json::object(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "26 Jul 2024, 12:00");
}

TEST(ChatTemplateApi, ConcurrentRendersOfOneTemplate) {
  auto t = ct::compile(
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content|trim }}{% if not loop.last %}\n{% endif %}{% endfor %}"
      "{{ messages|tojson }}");
  ASSERT_TRUE(t.ok());
  json ctx{{"messages", json::array()}};
  for (int i = 0; i < 50; ++i)
    ctx["messages"].push_back(json{{"role", i % 2 ? "assistant" : "user"}, {"content", " m" + std::to_string(i)}});
  const auto want = t->render(ctx);
  ASSERT_TRUE(want.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 50; ++i) {
        auto r = t->render(ctx);
        if (!r.ok() || *r != *want) ++mismatches[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(mismatches[k], 0);
}

}  // namespace
