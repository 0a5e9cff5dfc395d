#include "host/server/chat_output.hpp"

#include "host/server/openai_format.hpp"

namespace memra::server {

ChatOutputParser::ChatOutputParser(const ChatOutputConfig& config)
    : config_(config), tools_(config.tools, config.tool_defs) {
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
    if (!config_.parallel_tool_calls && next_call_ > 0) continue;  // one call at most
    out.tool_calls.push_back({next_call_++, random_id("call_"), std::move(c.name), std::move(c.arguments)});
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
