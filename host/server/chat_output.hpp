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
  bool forced_tool_call = false;              // the grammar forces calls (tool_choice required / named): they stream
};

// A tool call of the answer, or a piece of one as it streams (ToolCallPiece): every piece
// of a call has its index, id and name; the first `begins`, the last `ends`, and their
// arguments concatenate to the call's. A whole call begins and ends.
struct ToolCallOut {
  std::size_t index = 0;
  std::string id;
  std::string name;
  std::string arguments;
  bool begins = true;
  bool ends = true;
  bool cut = false;  // the answer ended inside it (max_tokens): the arguments are unfinished
};

// Appends streamed pieces to the calls they belong to (a piece that begins starts one).
void merge_tool_pieces(std::vector<ToolCallOut>& calls, const std::vector<ToolCallOut>& pieces);

struct ChatPieces {
  std::string reasoning, content;
  std::vector<ToolCallOut> tool_calls;  // calls and pieces of calls, in order
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(const ChatOutputConfig& config);
  ChatPieces push(const std::string& text);
  ChatPieces finish();
  std::size_t calls() const { return next_call_; }  // calls begun
  // Bytes of the fed text that were thinking (markers included).
  std::size_t reasoning_bytes() const { return splitter_ ? splitter_->reasoning_bytes() : 0; }

 private:
  void route(ReasoningSplitter::Split split, bool at_end, ChatPieces& out);
  ChatOutputConfig config_;
  std::optional<ReasoningSplitter> splitter_;
  ToolCallParser tools_;
  std::size_t next_call_ = 0;
  ToolCallOut current_;      // the call being streamed (its index, id, name)
  bool skipping_ = false;    // its pieces are dropped (a second call without parallel_tool_calls)
};

}  // namespace memra::server
