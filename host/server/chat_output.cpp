#include "host/server/chat_output.hpp"

#include "host/server/openai_format.hpp"

namespace memra::server {

void merge_tool_pieces(std::vector<ToolCallOut>& calls, const std::vector<ToolCallOut>& pieces) {
  for (const auto& p : pieces) {
    if (p.begins || calls.empty()) {
      calls.push_back(p);
      continue;
    }
    calls.back().arguments += p.arguments;
    calls.back().ends = p.ends;
    calls.back().cut = p.cut;
  }
}

ChatOutputParser::ChatOutputParser(const ChatOutputConfig& config)
    : config_(config), tools_(config.tools, config.tool_defs, config.forced_tool_call) {
  if (config.reasoning) splitter_.emplace(*config.reasoning, config.starts_in_reasoning);
}

void ChatOutputParser::route(ReasoningSplitter::Split split, bool at_end, ChatPieces& out) {
  out.reasoning += split.reasoning;
  ToolCallParser::Out t = tools_.push(split.content);
  if (at_end) {
    ToolCallParser::Out rest = tools_.finish();
    t.content += rest.content;
    t.calls.insert(t.calls.end(), rest.calls.begin(), rest.calls.end());
  }
  out.content += t.content;
  for (auto& c : t.calls) {
    if (c.begins) {
      skipping_ = !config_.parallel_tool_calls && next_call_ > 0;  // one call at most
      if (!skipping_) {
        current_.index = next_call_++;
        current_.id = random_id("call_");
        current_.name = std::move(c.name);
      }
    }
    if (skipping_) continue;
    ToolCallOut piece = current_;
    piece.arguments = std::move(c.arguments);
    piece.begins = c.begins;
    piece.ends = c.ends;
    piece.cut = c.cut;
    out.tool_calls.push_back(std::move(piece));
  }
}

ChatPieces ChatOutputParser::push(const std::string& text) {
  ChatPieces out;
  if (splitter_) route(splitter_->push(text), false, out);
  else route({{}, text}, false, out);
  return out;
}

ChatPieces ChatOutputParser::finish() {
  ChatPieces out;
  if (splitter_) route(splitter_->finish(), true, out);
  else route({}, true, out);
  return out;
}

}  // namespace memra::server
