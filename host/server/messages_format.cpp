#include "host/server/messages_format.hpp"

#include <nlohmann/json.hpp>

#include "host/json/bounded_parse.hpp"

namespace memra::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

const char* anthropic_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

ojson error_json(const ApiError& e, const std::optional<std::string>& request_id = std::nullopt) {
  const std::string message = e.param && e.message.rfind(*e.param + ":", 0) != 0 ? *e.param + ": " + e.message : e.message;
  return {{"type", "error"},
          {"error", {{"type", anthropic_type(e.status)}, {"message", message}}},
          {"request_id", request_id ? ojson(*request_id) : ojson(nullptr)}};
}

// Anthropic's tool ids read toolu_...; the chat parser's call_... ids get that prefix.
std::string tool_id(const std::string& id) { return id.rfind("call_", 0) == 0 ? "toolu_" + id.substr(5) : id; }

ojson tool_input(const std::string& arguments) {
  auto input = jsonio::parse(arguments);
  if (input && input->is_object()) return std::move(*input);
  return ojson::object();
}

std::string stop_reason(const ChoiceResult& a) {
  if (a.finish_reason == "tool_calls") return "tool_use";
  if (a.finish_reason == "length") return "max_tokens";
  if (a.stop_sequence) return "stop_sequence";
  return "end_turn";
}

// The Message's usage, or (delta) message_delta's. Fields the SDK's types hold that memra
// has nothing for are null, as Anthropic sends them.
ojson usage_json(const UsageCounts& u, bool delta = false) {
  // Anthropic's input_tokens leave out both the cache's reads and its writes.
  ojson usage = {{"input_tokens", u.prompt - u.cached - u.cache_written},
                 {"cache_creation_input_tokens", u.cache_written},
                 {"cache_read_input_tokens", u.cached},
                 {"output_tokens", u.completion},
                 {"output_tokens_details", u.reasoning ? ojson{{"thinking_tokens", u.reasoning_tokens}} : ojson(nullptr)},
                 {"server_tool_use", nullptr}};
  if (!delta) {
    usage["cache_creation"] = nullptr;
    usage["inference_geo"] = nullptr;
    usage["service_tier"] = "standard";
    usage["speed"] = nullptr;
  }
  return usage;
}

ojson text_block(const std::string& text) { return {{"type", "text"}, {"text", text}, {"citations", nullptr}}; }

ojson tool_use_block(const ToolCallOut& c, ojson input) {
  return {{"type", "tool_use"}, {"id", tool_id(c.id)}, {"name", c.name}, {"input", std::move(input)}, {"caller", {{"type", "direct"}}}};
}

// A Message around `content` (message_start's has no stop_reason yet).
ojson message_json(const std::string& id, const std::string& model, ojson content, ojson stop_reason, ojson stop_sequence,
                   ojson usage) {
  return {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", model}, {"content", std::move(content)},
          {"stop_reason", std::move(stop_reason)}, {"stop_sequence", std::move(stop_sequence)}, {"stop_details", nullptr},
          {"container", nullptr}, {"diagnostics", nullptr}, {"usage", std::move(usage)}};
}

class MessagesStream final : public StreamFormat {
 public:
  std::string open(const StartedCompletion& s) override {
    UsageCounts u;
    u.prompt = s.run->prompt_tokens();
    u.reasoning = s.output.reasoning.has_value();
    ojson message = message_json(s.meta.id, s.meta.model, ojson::array(), nullptr, nullptr, usage_json(u));
    return event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
           event("ping", {{"type", "ping"}});
  }

  std::string news(const ChoiceDelta& d, const ChatPieces* pieces, const std::optional<std::string>& finish) override {
    std::string out;
    if (pieces != nullptr) {
      if (!pieces->reasoning.empty()) {
        if (open_ != Open::thinking) out += start_block(Open::thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
        out += delta({{"type", "thinking_delta"}, {"thinking", pieces->reasoning}});
      }
      if (!pieces->content.empty()) {
        if (open_ != Open::text) out += start_block(Open::text, text_block(""));
        out += delta({{"type", "text_delta"}, {"text", pieces->content}});
      }
      // A call: its tool_use block, its arguments as input_json_delta parts as they are written.
      for (const auto& c : pieces->tool_calls) {
        if (c.begins) {
          out += start_block(Open::tool, tool_use_block(c, ojson::object()));
          answer_.tool_calls.push_back(c);
          answer_.tool_calls.back().arguments.clear();
        }
        if (open_ != Open::tool) continue;
        if (!c.arguments.empty()) {
          out += delta({{"type", "input_json_delta"}, {"partial_json", c.arguments}});
          answer_.tool_calls.back().arguments += c.arguments;
        }
        if (c.ends) out += stop_block();
      }
    }
    if (d.stop_sequence) answer_.stop_sequence = d.stop_sequence;
    if (finish) {
      answer_.finish_reason = *finish;
      out += stop_block();
      if (blocks_ == 0) {  // as the whole Message: at least one (empty) text block
        out += start_block(Open::text, text_block(""));
        out += stop_block();
      }
    }
    return out;
  }

  std::string close(const UsageCounts& usage) override {
    ojson stop_seq = answer_.stop_sequence && stop_reason(answer_) == "stop_sequence" ? ojson(*answer_.stop_sequence) : ojson(nullptr);
    return event("message_delta", {{"type", "message_delta"},
                                   {"delta", {{"stop_reason", stop_reason(answer_)}, {"stop_sequence", stop_seq},
                                              {"stop_details", nullptr}, {"container", nullptr}}},
                                   {"usage", usage_json(usage, /*delta=*/true)}}) +
           event("message_stop", {{"type", "message_stop"}});
  }

  std::string failed(const ApiError& error) override { return stop_block() + event("error", error_json(error)); }

 private:
  enum class Open { none, thinking, text, tool };

  static std::string event(const char* type, const ojson& data) {
    return std::string("event: ") + type + "\ndata: " + dump(data) + "\n\n";
  }
  std::string start_block(Open kind, ojson block) {
    std::string out = stop_block();
    open_ = kind;
    index_ = blocks_++;
    return out + event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(block)}});
  }
  std::string delta(ojson d) {
    return event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
  }
  std::string stop_block() {
    if (open_ == Open::none) return {};
    open_ = Open::none;
    return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }

  Open open_ = Open::none;
  std::int64_t blocks_ = 0, index_ = 0;
  ChoiceResult answer_;
};

}  // namespace

std::string anthropic_error_body(const ApiError& error, const std::optional<std::string>& request_id) {
  return dump(error_json(error, request_id));
}

Reply anthropic_error_reply(const ApiError& error, std::optional<std::int64_t> retry_after) {
  Reply reply = json_reply(error.status, anthropic_error_body(error));
  reply.error = error;  // the router writes it again with the request's id
  if (retry_after) reply.add_header("Retry-After", std::to_string(std::max<std::int64_t>(1, *retry_after)));
  return reply;
}

std::string message_body(const ResponseMeta& meta, const ChoiceResult& answer, const UsageCounts& usage) {
  ojson content = ojson::array();
  if (!answer.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", answer.reasoning}, {"signature", ""}});
  // At least one block: an empty text one when nothing else was written.
  if (!answer.text.empty() || (answer.tool_calls.empty() && answer.reasoning.empty())) content.push_back(text_block(answer.text));
  for (const auto& c : answer.tool_calls) content.push_back(tool_use_block(c, tool_input(c.arguments)));
  const std::string reason = stop_reason(answer);
  return dump(message_json(meta.id, meta.model, std::move(content), reason,
                           reason == "stop_sequence" ? ojson(*answer.stop_sequence) : ojson(nullptr), usage_json(usage))) +
         "\n";
}

std::unique_ptr<StreamFormat> messages_stream() { return std::make_unique<MessagesStream>(); }

}  // namespace memra::server
