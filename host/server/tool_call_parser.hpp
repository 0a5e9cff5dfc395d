// Finds a model's tool calls in its answer, in the model family's own format, as the
// text streams (text that could start a call is held back until it cannot):
//   hermes       <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>   (Qwen2.5, Qwen3, Hermes)
//   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>
//   llama3_json  {"name": ..., "parameters": {...}} as the whole answer (Llama 3.1-3.3; ';'-separated)
//   pythonic     ```tool_code\nname(k=v, ...)\n``` or [name(k=v), ...] (Gemma 3's function-calling form)
// A call that does not parse stays in the answer's content, as the model wrote it.
// When the output is forced to be calls (tool_choice required or a named function: the
// grammar of output_constraint.cpp writes exactly forced_call_frame()'s text around JSON
// that parses), each call streams instead: its name as soon as its head is written, then
// its arguments as the model writes them (JSON without the whitespace between tokens), so
// a call cut off by max_tokens ends with the arguments written so far and its markup never
// reaches the content.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

// A call, or a piece of one as it streams: the first piece names it (begins), the
// pieces' arguments concatenate to the call's, the last one ends it. A call found whole
// is one piece that begins and ends.
struct ToolCallPiece {
  bool begins = true;
  std::string name;       // set when it begins
  std::string arguments;  // the call's arguments, or their next part
  bool ends = true;
  bool cut = false;       // ended by the end of the answer: the arguments are unfinished
};

// The literal text a forced call of tool `name` has around its arguments in `format`
// (hermes, llama3_json, qwen3_coder: the grammar writes exactly this); qwen3_coder's
// parameters sit between as kCoderParameterOpen K ">\n" VALUE kCoderParameterClose.
struct CallFrame {
  std::string head, tail;
};
CallFrame forced_call_frame(ToolFormat format, const std::string& name);
inline constexpr std::string_view kCoderParameterOpen = "<parameter=";
inline constexpr std::string_view kCoderParameterClose = "\n</parameter>\n";
// Whether a qwen3_coder parameter of this schema is written as plain text (any other is JSON).
bool coder_plain_string(const nlohmann::ordered_json& property_schema);

class ToolCallParser {
 public:
  // `forced`: the output is constrained to calls of `tools` in `format` (see above).
  ToolCallParser(ToolFormat format, const std::vector<ToolDef>* tools, bool forced = false);
  struct Out {
    std::string content;
    std::vector<ToolCallPiece> calls;  // calls and pieces of calls since the last call, in order
  };
  Out push(std::string_view text);
  Out finish();

 private:
  Out scan(bool at_end);
  Out stream(bool at_end);
  ToolFormat format_;
  const std::vector<ToolDef>* tools_;
  std::string held_;
  bool whole_answer_ = false;  // llama3_json: the answer began with '{' (decided at the end)
  bool started_ = false;       // some non-whitespace text was seen
  bool after_call_ = false;    // just after a call: whitespace is dropped

  // Forced calls, streamed (stream()): where the text is in the call's frame.
  enum class Stage { between, head, args, tail, params, value, value_close, off };
  struct JsonScan {  // a JSON value's end, found character by character
    bool in_string = false, escape = false, scalar = false, done = false;
    int depth = 0;
  };
  Stage stage_ = Stage::between;
  const ToolDef* tool_ = nullptr;  // the call being written
  std::string tail_;
  JsonScan json_;
  bool first_param_ = true, plain_value_ = false;
};

// Parses one call body of a format (exposed for tests): hermes/llama3 JSON text, a
// qwen3_coder <function=...> block, or a pythonic call list. Empty when it does not parse.
std::vector<ParsedToolCall> parse_tool_calls(ToolFormat format, std::string_view body, const std::vector<ToolDef>* tools);

}  // namespace memra::server
