// The chat answer splitter on real model output strings (as the model families'
// documentation and serving logs show them): thinking into reasoning_content, tool
// calls in each family's format into tool_calls, the rest into content; fed whole, byte
// by byte, and in random chunks, the pieces are the same.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "host/server/chat_output.hpp"

namespace memra::server {
namespace {

using json = nlohmann::json;

struct Whole {
  std::string reasoning, content;
  std::vector<std::pair<std::string, json>> calls;  // name, arguments (their text when they are not JSON)
  std::vector<ToolCallOut> raw;                     // the calls, their pieces merged
  std::vector<std::size_t> argument_pieces;         // per call: how many non-empty argument pieces
  std::size_t reasoning_bytes = 0;
};

Whole run(const ChatOutputConfig& cfg, const std::string& text, std::size_t chunk /*0 = random*/, unsigned seed = 1) {
  ChatOutputParser p(cfg);
  Whole w;
  auto take = [&](ChatPieces pieces) {
    w.reasoning += pieces.reasoning;
    w.content += pieces.content;
    for (auto& c : pieces.tool_calls) {
      EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
      if (c.begins) {
        EXPECT_EQ(c.index, w.raw.size());
        EXPECT_TRUE(w.raw.empty() || w.raw.back().ends) << "a call begins before the last one ended";
        w.argument_pieces.push_back(0);
      } else {
        ASSERT_FALSE(w.raw.empty());
        EXPECT_FALSE(w.raw.back().ends) << "a piece after its call ended";
        EXPECT_EQ(c.index, w.raw.back().index);
        EXPECT_EQ(c.id, w.raw.back().id);
        EXPECT_EQ(c.name, w.raw.back().name);
      }
      if (!c.arguments.empty()) ++w.argument_pieces.back();
      merge_tool_pieces(w.raw, {c});
    }
  };
  std::mt19937 rng(seed);
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t n = chunk ? chunk : std::uniform_int_distribution<std::size_t>(1, 9)(rng);
    take(p.push(text.substr(at, n)));
    at += n;
  }
  take(p.finish());
  w.reasoning_bytes = p.reasoning_bytes();
  for (const auto& c : w.raw) {
    EXPECT_TRUE(c.ends) << c.name << " never ended";
    const json args = json::parse(c.arguments, nullptr, false);
    w.calls.emplace_back(c.name, args.is_discarded() ? json(c.arguments) : args);
  }
  EXPECT_EQ(p.calls(), w.raw.size());
  return w;
}

// The same result whole, byte by byte and in random chunks.
Whole split(const ChatOutputConfig& cfg, const std::string& text) {
  const Whole whole = run(cfg, text, text.size() + 1);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{0}}) {
    for (unsigned seed = 1; seed <= (chunk ? 1u : 5u); ++seed) {
      const Whole w = run(cfg, text, chunk, seed);
      EXPECT_EQ(w.reasoning, whole.reasoning) << "chunk " << chunk;
      EXPECT_EQ(w.content, whole.content) << "chunk " << chunk;
      EXPECT_EQ(w.calls, whole.calls) << "chunk " << chunk;
      EXPECT_EQ(w.raw.size(), whole.raw.size());
      for (std::size_t i = 0; i < std::min(w.raw.size(), whole.raw.size()); ++i) {
        EXPECT_EQ(w.raw[i].arguments, whole.raw[i].arguments) << "chunk " << chunk;
        EXPECT_EQ(w.raw[i].cut, whole.raw[i].cut) << "chunk " << chunk;
      }
    }
  }
  return whole;
}

ChatOutputConfig thinking(bool starts_inside = false) {
  ChatOutputConfig c;
  c.reasoning = ReasoningMarkers{"<think>", "</think>"};
  c.starts_in_reasoning = starts_inside;
  return c;
}

ChatOutputConfig tools(ToolFormat f, const std::vector<ToolDef>* defs = nullptr) {
  ChatOutputConfig c = thinking();
  c.tools = f;
  c.tool_defs = defs;
  return c;
}

TEST(ChatOutput, Qwen3ThinkingIsSplitFromTheAnswer) {
  const std::string out =
      "<think>\nOkay, the user is asking for the capital of France. That's Paris.\n</think>\n\nThe capital of France is "
      "**Paris**.";
  const Whole w = split(thinking(), out);
  EXPECT_EQ(w.reasoning, "Okay, the user is asking for the capital of France. That's Paris.");
  EXPECT_EQ(w.content, "The capital of France is **Paris**.");
  EXPECT_EQ(w.reasoning_bytes, out.find("</think>") + 8);
}

TEST(ChatOutput, AnEmptyThinkBlockAndNoThinkingAtAll) {
  Whole w = split(thinking(), "<think>\n\n</think>\n\nHello! How can I help you today?");
  EXPECT_EQ(w.reasoning, "");
  EXPECT_EQ(w.content, "Hello! How can I help you today?");
  w = split(thinking(), "Hello! No tags here, and a < and </ in the text.");
  EXPECT_EQ(w.reasoning, "");
  EXPECT_EQ(w.content, "Hello! No tags here, and a < and </ in the text.");
  EXPECT_EQ(w.reasoning_bytes, 0u);
}

TEST(ChatOutput, DeepSeekR1StartsInsideItsThinking) {
  // The R1 template ends the prompt with "<think>\n": the output has only the close tag.
  const Whole w = split(thinking(true), "Okay, so I need to add 2 and 3.\n\n2 + 3 = 5.\n</think>\n\n**5**");
  EXPECT_EQ(w.reasoning, "Okay, so I need to add 2 and 3.\n\n2 + 3 = 5.");
  EXPECT_EQ(w.content, "**5**");
  // Cut off while thinking (max_tokens): everything is reasoning, nothing leaks into content.
  const Whole cut = split(thinking(true), "Okay, so I need to think about </thi");
  EXPECT_EQ(cut.content, "");
  EXPECT_EQ(cut.reasoning, "Okay, so I need to think about </thi");
}

TEST(ChatOutput, HermesParallelCallsOfQwen25) {
  // Qwen2.5's function-calling example answer.
  const std::string out =
      "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San Francisco, CA, USA\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, "
      "CA, USA\", \"date\": \"2024-10-01\"}}\n</tool_call>";
  const Whole w = split(tools(ToolFormat::hermes), out);
  EXPECT_EQ(w.content, "");
  ASSERT_EQ(w.calls.size(), 2u);
  EXPECT_EQ(w.calls[0].first, "get_current_temperature");
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"location":"San Francisco, CA, USA"})"));
  EXPECT_EQ(w.calls[1].first, "get_temperature_date");
  EXPECT_EQ(w.calls[1].second["date"], "2024-10-01");
}

TEST(ChatOutput, Qwen3ThinksThenCallsATool) {
  const std::string out =
      "<think>\nThe user wants the weather in Paris. I should call get_weather with city Paris.\n</think>\n\nLet me "
      "check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
      "</tool_call>";
  const Whole w = split(tools(ToolFormat::hermes), out);
  EXPECT_EQ(w.reasoning, "The user wants the weather in Paris. I should call get_weather with city Paris.");
  EXPECT_EQ(w.content, "Let me check.\n");
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"city":"Paris","unit":"celsius"})"));
  EXPECT_EQ(w.reasoning.find("tool_call"), std::string::npos);
}

TEST(ChatOutput, Llama31JsonCall) {
  // Llama 3.1's documented JSON tool call (its <|python_tag|> is a special token the detokenizer drops).
  const Whole w = split(tools(ToolFormat::llama3_json),
                        "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, CA\", "
                        "\"unit\": \"Fahrenheit\"}}");
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].first, "get_current_conditions");
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"location":"San Francisco, CA","unit":"Fahrenheit"})"));
  EXPECT_EQ(w.content, "");
  // Two calls separated by ';', and an answer that is only text.
  const Whole two = split(tools(ToolFormat::llama3_json),
                          "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}");
  ASSERT_EQ(two.calls.size(), 2u);
  EXPECT_EQ(two.calls[1].second["x"], 1);
  EXPECT_EQ(split(tools(ToolFormat::llama3_json), "The weather is sunny.").content, "The weather is sunny.");
  EXPECT_EQ(split(tools(ToolFormat::llama3_json), "{not json at all}").content, "{not json at all}");
}

TEST(ChatOutput, Qwen3CoderXmlCallWithTypedParameters) {
  std::vector<ToolDef> defs(1);
  defs[0].name = "square_the_number";
  defs[0].parameters = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"input_num":{"type":"number"},"label":{"type":"string"}}})");
  const std::string out =
      "<tool_call>\n<function=square_the_number>\n<parameter=input_num>\n1024\n</parameter>\n<parameter=label>\n"
      "007\n</parameter>\n</function>\n</tool_call>";
  const Whole w = split(tools(ToolFormat::qwen3_coder, &defs), out);
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].first, "square_the_number");
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"input_num":1024,"label":"007"})")) << "types follow the schema";
  // A path with backslashes, as a real Qwen3-Coder answer wrote it.
  const Whole p = split(tools(ToolFormat::qwen3_coder),
                        "<tool_call>\n<function=read_file>\n<parameter=path>\nT:\\Code\\Apps\\talk.py\n</parameter>\n"
                        "</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].second["path"], "T:\\Code\\Apps\\talk.py");
}

TEST(ChatOutput, GemmaToolCodeCall) {
  const Whole w = split(tools(ToolFormat::pythonic),
                        "```tool_code\nget_product_name_by_PID(PID=\"807ZPKBL9V\", exact=True, limit=3)\n```");
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].first, "get_product_name_by_PID");
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"PID":"807ZPKBL9V","exact":true,"limit":3})"));
  const Whole list = split(tools(ToolFormat::pythonic), "[get_weather(city='Paris'), get_time(zone=None)]");
  ASSERT_EQ(list.calls.size(), 2u);
  EXPECT_TRUE(list.calls[1].second["zone"].is_null());
}

TEST(ChatOutput, AMalformedCallStaysInTheContent) {
  const std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par\n</tool_call>";
  const Whole w = split(tools(ToolFormat::hermes), "Sure. " + bad);
  EXPECT_TRUE(w.calls.empty());
  EXPECT_EQ(w.content, "Sure. " + bad);
  // Cut off inside a call (max_tokens): the unfinished call is content too.
  const Whole cut = split(tools(ToolFormat::hermes), "<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ChatOutput, OnlyTheFirstCallWithoutParallelToolCalls) {
  ChatOutputConfig c = tools(ToolFormat::hermes);
  c.parallel_tool_calls = false;
  const Whole w = split(c,
                        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                        "\"b\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.calls[0].first, "a");
}

// Forced calls (tool_choice required / named) in the frame the grammar writes them in.
ChatOutputConfig forced(ToolFormat f, const std::vector<ToolDef>* defs) {
  ChatOutputConfig c = tools(f, defs);
  c.forced_tool_call = true;
  return c;
}

std::vector<ToolDef> weather_tools() {
  std::vector<ToolDef> defs(2);
  defs[0].name = "get_weather";
  defs[0].parameters = nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["c","f"]}}})");
  defs[1].name = "get_weather_alerts";
  defs[1].parameters = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"region":{"type":"string"}}})");
  return defs;
}

// The text of a forced call as the grammar writes it.
std::string framed(ToolFormat f, const std::string& name, const std::string& inner) {
  const CallFrame frame = forced_call_frame(f, name);
  return frame.head + inner + frame.tail;
}

TEST(ChatOutput, ForcedHermesCallsStreamTheirArgumentsAsWritten) {
  const auto defs = weather_tools();
  const std::string out = framed(ToolFormat::hermes, "get_weather", "{\"city\": \"Paris, \\\"FR\\\"\", \"days\": [1, 2]}") +
                          "\n" + framed(ToolFormat::hermes, "get_weather_alerts", "{ \"region\" : \"EU\" }");
  const Whole w = split(forced(ToolFormat::hermes, &defs), out);
  EXPECT_EQ(w.content, "");
  ASSERT_EQ(w.raw.size(), 2u);
  EXPECT_EQ(w.raw[0].name, "get_weather");
  EXPECT_EQ(w.raw[1].name, "get_weather_alerts");
  // The arguments as the model wrote them, without the whitespace between tokens.
  EXPECT_EQ(w.raw[0].arguments, R"({"city":"Paris, \"FR\"","days":[1,2]})");
  EXPECT_EQ(w.raw[1].arguments, R"({"region":"EU"})");
  EXPECT_FALSE(w.raw[0].cut);
  // Byte by byte, every character of the arguments is a piece of its own.
  const Whole bytes = run(forced(ToolFormat::hermes, &defs), out, 1);
  EXPECT_EQ(bytes.argument_pieces[0], w.raw[0].arguments.size());
  EXPECT_EQ(bytes.argument_pieces[1], w.raw[1].arguments.size());
}

TEST(ChatOutput, AForcedCallCutByMaxTokensKeepsItsMarkupOutOfTheContent) {
  const auto defs = weather_tools();
  const ChatOutputConfig cfg = forced(ToolFormat::hermes, &defs);
  const std::string call = framed(ToolFormat::hermes, "get_weather", "{\"city\": \"Paris\"}");
  // Cut inside the arguments: the call with the arguments written so far.
  Whole w = split(cfg, call.substr(0, call.find("Paris") + 3));
  EXPECT_EQ(w.content, "");
  ASSERT_EQ(w.raw.size(), 1u);
  EXPECT_EQ(w.raw[0].name, "get_weather");
  EXPECT_EQ(w.raw[0].arguments, R"({"city":"Par)");
  EXPECT_TRUE(w.raw[0].cut);
  // Cut before the name is complete: no call, and nothing in the content.
  w = split(cfg, call.substr(0, call.find("weather")));
  EXPECT_EQ(w.content, "");
  EXPECT_TRUE(w.raw.empty());
  // Cut in the closing markup: the arguments are whole.
  w = split(cfg, call.substr(0, call.size() - 4));
  ASSERT_EQ(w.raw.size(), 1u);
  EXPECT_EQ(w.raw[0].arguments, R"({"city":"Paris"})");
  EXPECT_FALSE(w.raw[0].cut);
  // A second call cut after the first completed.
  w = split(cfg, call + "\n" + call.substr(0, call.find("city")));
  ASSERT_EQ(w.raw.size(), 2u);
  EXPECT_FALSE(w.raw[0].cut);
  EXPECT_TRUE(w.raw[1].cut);
  EXPECT_EQ(w.raw[1].arguments, "{\"");
}

TEST(ChatOutput, ForcedQwen3CoderCallsStreamAsJson) {
  const auto defs = weather_tools();
  const std::string out = framed(ToolFormat::qwen3_coder, "get_weather",
                                 "<parameter=city>\nNew \"York\"\nNY\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                                 "<parameter=unit>\n\"f\"\n</parameter>\n") +
                          "\n" + framed(ToolFormat::qwen3_coder, "get_weather_alerts", "");
  const Whole w = split(forced(ToolFormat::qwen3_coder, &defs), out);
  EXPECT_EQ(w.content, "");
  ASSERT_EQ(w.raw.size(), 2u);
  EXPECT_EQ(w.raw[0].arguments, R"({"city":"New \"York\"\nNY","days":3,"unit":"f"})");
  EXPECT_EQ(w.calls[0].second, json::parse(R"({"city":"New \"York\"\nNY","days":3,"unit":"f"})"));
  EXPECT_EQ(w.raw[1].arguments, "{}");
  // The same call unforced parses to the same arguments.
  const Whole plain = split(tools(ToolFormat::qwen3_coder, &defs), out);
  ASSERT_EQ(plain.calls.size(), 2u);
  EXPECT_EQ(plain.calls[0].second, w.calls[0].second);
  // Cut inside a text value: what was written, without the start of a closing tag.
  const Whole cut = split(forced(ToolFormat::qwen3_coder, &defs), out.substr(0, out.find("NY") + 2) + "\n</para");
  ASSERT_EQ(cut.raw.size(), 1u);
  EXPECT_TRUE(cut.raw[0].cut);
  EXPECT_EQ(cut.raw[0].arguments, R"({"city":"New \"York\"\nNY)");
  EXPECT_EQ(cut.content, "");
}

TEST(ChatOutput, ForcedLlama3CallsAndTextOutsideTheFrame) {
  const auto defs = weather_tools();
  const Whole w = split(forced(ToolFormat::llama3_json, &defs),
                        framed(ToolFormat::llama3_json, "get_weather", "{\"days\": 2}") + "; " +
                            framed(ToolFormat::llama3_json, "get_weather_alerts", "{}"));
  ASSERT_EQ(w.raw.size(), 2u);
  EXPECT_EQ(w.raw[0].arguments, R"({"days":2})");
  EXPECT_EQ(w.raw[1].arguments, "{}");
  EXPECT_EQ(w.content, "");
  // Text the grammar would never write is read as unforced output.
  EXPECT_EQ(split(forced(ToolFormat::hermes, &defs), "Hello there.").content, "Hello there.");
}

TEST(ChatOutput, FormatsAreFoundInTheTemplates) {
  EXPECT_EQ(tool_format_for_template("{{- '<tool_call>\\n{\"name\": ...' }}"), ToolFormat::hermes);
  EXPECT_EQ(tool_format_for_template("<tool_call>\n<function=name>\n<parameter=x>"), ToolFormat::qwen3_coder);
  EXPECT_EQ(tool_format_for_template("{{- '<|python_tag|>' }}{% if tools %}\"parameters\"{% endif %}"),
            ToolFormat::llama3_json);
  EXPECT_EQ(tool_format_for_template("{% for m in messages %}{{ m.content }}{% endfor %}"), ToolFormat::none);
  EXPECT_TRUE(reasoning_markers("{%- if '</think>' in content %}"));
  EXPECT_FALSE(reasoning_markers("{{ messages }}"));
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", {"<think>", "</think>"}));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", {"<think>", "</think>"}));
  EXPECT_TRUE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n", {"<think>", "</think>"}));
  EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n", {"<think>", "</think>"}));
  EXPECT_FALSE(prompt_closes_reasoning("<|im_start|>assistant\n<think>\n", {"<think>", "</think>"}));
}

}  // namespace
}  // namespace memra::server
