#include "host/server/responses_format.hpp"

namespace memra::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

bool incomplete(const ChoiceResult& a) { return a.finish_reason == "length"; }

ojson usage_json(const UsageCounts& u) {
  return {{"input_tokens", u.prompt},
          {"input_tokens_details", {{"cached_tokens", u.cached}, {"cache_write_tokens", u.cache_written}}},
          {"output_tokens", u.completion},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.prompt + u.completion}};
}

ojson text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}};
}

ojson reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id}, {"type", "reasoning"}, {"summary", ojson::array()},
          {"content", ojson::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

ojson message_item(const std::string& id, const char* status, ojson content) {
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

ojson call_item(const std::string& id, const ToolCallOut& c, const char* status, const std::string& arguments) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"arguments", arguments}, {"call_id", c.id}, {"name", c.name}};
}

// The Response object around `output`.
ojson response_json(const ResponseHead& head, const char* status, ojson output, const UsageCounts* usage,
                    const ApiError* error = nullptr) {
  ojson r = {{"id", head.id}, {"object", "response"}, {"created_at", head.created_at}, {"status", status}};
  r["error"] = error ? ojson{{"code", "server_error"}, {"message", error->message}} : ojson(nullptr);
  r["incomplete_details"] = std::string(status) == "incomplete" ? ojson{{"reason", "max_output_tokens"}} : ojson(nullptr);
  r["model"] = head.model;
  r["output"] = std::move(output);
  for (const auto& [k, v] : head.echo.items()) r[k] = v;
  if (usage) r["usage"] = usage_json(*usage);  // (omitted while in progress, as OpenAI does)
  return r;
}

std::string item_id(const char* prefix) { return random_id(prefix); }

class ResponsesStream final : public StreamFormat {
 public:
  ResponsesStream(ResponseHead head, ResponseDone on_done)
      : head_(std::move(head)), on_done_(std::move(on_done)) {}

  std::string open(const StartedCompletion&) override {
    std::string out;
    ojson r = response_json(head_, "in_progress", ojson::array(), nullptr);
    out += event("response.created", {{"response", r}});
    out += event("response.in_progress", {{"response", r}});
    return out;
  }

  std::string news(const ChoiceDelta& d, const ChatPieces* pieces, const std::optional<std::string>& finish) override {
    std::string out;
    if (pieces != nullptr) {
      if (!pieces->reasoning.empty()) {
        if (open_ != Open::reasoning) {
          out += close_item();
          open_item(Open::reasoning, out);
        }
        answer_.reasoning += pieces->reasoning;
        item_text_ += pieces->reasoning;
        out += event("response.reasoning_text.delta", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                       {"delta", pieces->reasoning}});
      }
      if (!pieces->content.empty()) {
        if (open_ != Open::message) {
          out += close_item();
          open_item(Open::message, out);
        }
        answer_.text += pieces->content;
        item_text_ += pieces->content;
        out += event("response.output_text.delta", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                    {"delta", pieces->content}, {"logprobs", ojson::array()}});
      }
      // A call: its item added (arguments ""), its arguments as they are written, then done.
      for (const auto& c : pieces->tool_calls) {
        if (c.begins) {
          out += close_item();
          open_ = Open::call;
          index_ = next_index_++;
          item_id_ = item_id("fc_");
          item_text_.clear();
          call_ = c;
          out += event("response.output_item.added", {{"output_index", index_}, {"item", call_item(item_id_, c, "in_progress", "")}});
        }
        if (open_ != Open::call) continue;
        if (!c.arguments.empty()) {
          item_text_ += c.arguments;
          out += event("response.function_call_arguments.delta",
                       {{"item_id", item_id_}, {"output_index", index_}, {"delta", c.arguments}});
        }
        call_.cut = c.cut;
        if (c.ends) out += close_item();
      }
    }
    if (d.stop_sequence) answer_.stop_sequence = d.stop_sequence;
    if (finish) {
      answer_.finish_reason = *finish;
      out += close_item();
      // Every answer has a message, as the whole Response has (empty when it only called tools).
      if (!had_message_ && answer_.tool_calls.empty()) {
        open_item(Open::message, out);
        out += close_item();
      }
    }
    return out;
  }

  std::string close(const UsageCounts& usage) override {
    const char* status = incomplete(answer_) ? "incomplete" : "completed";
    ojson response = response_json(head_, status, output_, &usage);
    if (on_done_) on_done_(answer_, response.dump(-1, ' ', false, ojson::error_handler_t::replace));
    return event(incomplete(answer_) ? "response.incomplete" : "response.completed", {{"response", std::move(response)}});
  }

  std::string failed(const ApiError& error) override {
    open_call_failed_ = true;
    std::string out = close_item();
    return out + event("response.failed", {{"response", response_json(head_, "failed", output_, nullptr, &error)}});
  }

 private:
  enum class Open { none, reasoning, message, call };

  std::string event(const char* type, ojson fields) {
    ojson e = {{"type", type}, {"sequence_number", sequence_++}};
    for (auto& [k, v] : fields.items()) e[k] = std::move(v);
    return std::string("event: ") + type + "\ndata: " + dump(e) + "\n\n";
  }

  void open_item(Open kind, std::string& out) {
    open_ = kind;
    index_ = next_index_++;
    item_text_.clear();
    if (kind == Open::reasoning) {
      item_id_ = item_id("rs_");
      out += event("response.output_item.added",
                   {{"output_index", index_},
                    {"item", {{"id", item_id_}, {"type", "reasoning"}, {"summary", ojson::array()}, {"content", ojson::array()}}}});
      out += event("response.content_part.added", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                   {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    } else {
      had_message_ = true;
      item_id_ = item_id("msg_");
      out += event("response.output_item.added",
                   {{"output_index", index_}, {"item", message_item(item_id_, "in_progress", ojson::array())}});
      out += event("response.content_part.added",
                   {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"part", text_part("")}});
    }
  }

  std::string close_item() {
    std::string out;
    if (open_ == Open::reasoning) {
      out += event("response.reasoning_text.done",
                   {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"text", item_text_}});
      out += event("response.content_part.done", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                  {"part", {{"type", "reasoning_text"}, {"text", item_text_}}}});
      ojson item = reasoning_item(item_id_, item_text_);
      out += event("response.output_item.done", {{"output_index", index_}, {"item", item}});
      output_.push_back(std::move(item));
    } else if (open_ == Open::message) {
      out += event("response.output_text.done", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                 {"text", item_text_}, {"logprobs", ojson::array()}});
      out += event("response.content_part.done",
                   {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"part", text_part(item_text_)}});
      const bool cut = answer_.finish_reason == "length";
      ojson item = message_item(item_id_, cut ? "incomplete" : "completed", ojson::array({text_part(item_text_)}));
      out += event("response.output_item.done", {{"output_index", index_}, {"item", item}});
      output_.push_back(std::move(item));
    } else if (open_ == Open::call) {
      out += event("response.function_call_arguments.done",
                   {{"item_id", item_id_}, {"output_index", index_}, {"name", call_.name}, {"arguments", item_text_}});
      ojson item = call_item(item_id_, call_, call_.cut || open_call_failed_ ? "incomplete" : "completed", item_text_);
      out += event("response.output_item.done", {{"output_index", index_}, {"item", item}});
      output_.push_back(std::move(item));
      call_.arguments = item_text_;
      answer_.tool_calls.push_back(call_);
    }
    open_ = Open::none;
    return out;
  }

  ResponseHead head_;
  ResponseDone on_done_;
  std::int64_t sequence_ = 0;
  std::int64_t next_index_ = 0, index_ = 0;
  Open open_ = Open::none;
  bool had_message_ = false;
  std::string item_id_, item_text_;  // the open item's (a call's text: its arguments)
  ToolCallOut call_;                 // the open call
  bool open_call_failed_ = false;
  ojson output_ = ojson::array();
  ChoiceResult answer_;
};

}  // namespace

std::string response_body(const ResponseHead& head, const ChoiceResult& answer, const UsageCounts& usage) {
  ojson output = ojson::array();
  if (!answer.reasoning.empty()) output.push_back(reasoning_item(item_id("rs_"), answer.reasoning));
  if (!answer.text.empty() || answer.tool_calls.empty())
    output.push_back(message_item(item_id("msg_"), incomplete(answer) ? "incomplete" : "completed",
                                  ojson::array({text_part(answer.text)})));
  for (const auto& c : answer.tool_calls)
    output.push_back(call_item(item_id("fc_"), c, c.cut ? "incomplete" : "completed", c.arguments));
  return dump(response_json(head, incomplete(answer) ? "incomplete" : "completed", std::move(output), &usage)) + "\n";
}

nlohmann::ordered_json assistant_messages(const ChoiceResult& answer) {
  ojson m = {{"role", "assistant"}};
  ojson calls = ojson::array();
  for (const auto& c : answer.tool_calls)  // a call cut by max_output_tokens is not sent back: its arguments are unfinished
    if (!c.cut) calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  m["content"] = answer.text.empty() && !calls.empty() ? ojson(nullptr) : ojson(answer.text);
  if (!answer.reasoning.empty()) m["reasoning_content"] = answer.reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  return ojson::array({std::move(m)});
}

std::unique_ptr<StreamFormat> responses_stream(ResponseHead head, ResponseDone on_done) {
  return std::make_unique<ResponsesStream>(std::move(head), std::move(on_done));
}

}  // namespace memra::server
