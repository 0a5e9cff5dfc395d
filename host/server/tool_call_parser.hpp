// Finds a model's tool calls in its answer, in the model family's own format, as the
// text streams (text that could start a call is held back until it cannot):
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>   (Qwen2.5, Qwen3, Hermes)
//   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
//   llama3_json  {"name": ..., "parameters": {...}} as the whole answer (Llama 3.1-3.3; ';'-separated)
//   pythonic     ```tool_code\nname(k=v, ...)\n``` or [name(k=v), ...] (Gemma 3's function-calling form)
// A call that does not parse stays in the answer's content, as the model wrote it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "host/server/request_validation.hpp"

namespace memra::server {

enum class ToolFormat { none, hermes, qwen3_coder, llama3_json, pythonic };

// The format a chat template asks its model to call tools in (none: it renders no tools).
ToolFormat tool_format_for_template(std::string_view template_source);
const char* to_string(ToolFormat f);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text
};

class ToolCallParser {
 public:
  ToolCallParser(ToolFormat format, const std::vector<ToolDef>* tools);
  struct Out {
    std::string content;
    std::vector<ParsedToolCall> calls;  // completed since the last call
  };
  Out push(std::string_view text);
  Out finish();

 private:
  Out scan(bool at_end);
  ToolFormat format_;
  const std::vector<ToolDef>* tools_;
  std::string held_;
  bool whole_answer_ = false;  // llama3_json: the answer began with '{' (decided at the end)
  bool started_ = false;       // some non-whitespace text was seen
  bool after_call_ = false;    // just after a call: whitespace is dropped
};

// Parses one call body of a format (exposed for tests): hermes/llama3 JSON text, a
// qwen3_coder <function=...> block, or a pythonic call list. Empty when it does not parse.
std::vector<ParsedToolCall> parse_tool_calls(ToolFormat format, std::string_view body, const std::vector<ToolDef>* tools);

}  // namespace memra::server
