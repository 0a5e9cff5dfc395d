// One chat choice's answer as the client sees it: the generated text split into
// reasoning_content (the model's thinking), content, and tool_calls in the model's
// format, both for a whole answer and as it streams. The splitting only depends on
// the text, so the streamed pieces concatenate to the whole answer's.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "host/server/reasoning_parser.hpp"
#include "host/server/tool_call_parser.hpp"

namespace memra::server {

struct ChatOutputConfig {
  std::optional<ReasoningMarkers> reasoning;  // the model thinks in these
  bool starts_in_reasoning = false;           // the prompt opened the thinking
  ToolFormat tools = ToolFormat::none;        // parse calls in this format (none: no tools offered)
  const std::vector<ToolDef>* tool_defs = nullptr;
  bool parallel_tool_calls = true;            // false: only the first call is kept
};

struct ToolCallOut {
  std::size_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatPieces {
  std::string reasoning, content;
  std::vector<ToolCallOut> tool_calls;  // completed calls
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputConfig& config);
  ChatPieces push(const std::string& text);
  ChatPieces finish();
  std::size_t calls() const { return next_call_; }
  // Bytes of the fed text that were thinking (markers included).
  std::size_t reasoning_bytes() const { return splitter_ ? splitter_->reasoning_bytes() : 0; }

 private:
  void route(ReasoningSplitter::Split split, bool at_end, ChatPieces& out);
  ChatOutputConfig config_;
  std::optional<ReasoningSplitter> splitter_;
  ToolCallParser tools_;
  std::size_t next_call_ = 0;
};

}  // namespace memra::server
