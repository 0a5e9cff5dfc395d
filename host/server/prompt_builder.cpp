#include "host/server/prompt_builder.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace memra::server {

namespace {

using ojson = nlohmann::ordered_json;

// A message as Hugging Face chat templates expect it: tool call arguments as an object
// (templates apply tojson to them) when they are JSON, a tool result with its call's name.
ojson template_message(const ChatMessage& m) {
  ojson msg = {{"role", m.role}, {"content", m.content.value_or("")}};
  if (!m.name.empty()) msg["name"] = m.name;
  if (m.reasoning_content) msg["reasoning_content"] = *m.reasoning_content;
  if (!m.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const auto& c : m.tool_calls) {
      ojson call = ojson::object();
      call["id"] = c.id;
      call["type"] = "function";
      ojson& function = call["function"];
      function["name"] = c.name;
      function["arguments"] = c.parsed ? *c.parsed : ojson(c.arguments);
      calls.push_back(std::move(call));
    }
    msg["tool_calls"] = std::move(calls);
  }
  if (!m.tool_call_id.empty()) msg["tool_call_id"] = m.tool_call_id;
  return msg;
}

}  // namespace

ChatExtras chat_extras(const CompletionRequest& request) {
  ChatExtras e;
  if (request.tool_choice.mode != ToolChoiceMode::none) e.tools = &request.tools;
  e.kwargs = request.chat_template_kwargs;
  e.reasoning_effort = request.reasoning_effort;
  return e;
}

RenderedChat render_chat(const ServedModel& model, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const char* param, const ChatExtras& extras) {
  RenderedChat out;
  if (!model.text.chat_template) {
    out.error = errors::invalid_request("chat_template_missing",
                                        "the model '" + model.alias +
                                            "' ships no chat template, so it cannot chat; use /v1/completions "
                                            "with a prompt",
                                        std::string(param));
    return out;
  }
  ojson list = ojson::array();
  for (const auto& m : messages) list.push_back(template_message(m));
  ojson context = {{"messages", std::move(list)}, {"add_generation_prompt", add_generation_prompt}};
  for (const auto& [key, value] : extras.kwargs.items()) context[key] = value;
  if (extras.reasoning_effort) {
    if (!context.contains("reasoning_effort")) context["reasoning_effort"] = *extras.reasoning_effort;
    // Templates with a thinking switch (Qwen3 & co.) read enable_thinking.
    if (!context.contains("enable_thinking"))
      context["enable_thinking"] = *extras.reasoning_effort != "none" && *extras.reasoning_effort != "minimal";
  }
  const bool with_tools = extras.tools != nullptr && !extras.tools->empty();
  std::optional<Result<std::string>> without_tools;
  if (with_tools) {
    without_tools = model.text.render_chat(context);
    ojson tools = ojson::array();
    for (const auto& t : *extras.tools) tools.push_back(t.raw);
    context["tools"] = std::move(tools);
  }
  auto rendered = model.text.render_chat(context);
  if (rendered && without_tools && *without_tools && **without_tools == *rendered) {
    out.error = errors::invalid_request("unsupported_parameter",
                                        "the chat template of '" + model.alias +
                                            "' does not render tools (its output is the same without them), so the "
                                            "model would never see them; serve it with a template that does "
                                            "(--chat-template)",
                                        "tools");
    return out;
  }
  if (!rendered) {
    out.error = errors::invalid_request("chat_template_error",
                                        "the model's chat template refused these messages: " +
                                            rendered.error().message,
                                        std::string(param));
    return out;
  }
  out.text = std::move(*rendered);
  return out;
}

std::optional<ApiError> check_token_ids(const ServedModel& model, const std::vector<std::int32_t>& ids,
                                        const char* param) {
  const auto vocab = model.vocab_size();
  for (std::int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return errors::invalid_request("invalid_value",
                                     "token id " + std::to_string(id) + " is outside the vocabulary of '" +
                                         model.alias + "' (0 to " + std::to_string(vocab - 1) + ")",
                                     std::string(param));
    }
  }
  return std::nullopt;
}

BuiltPrompts build_prompts(const ServedModel& model, const CompletionRequest& request) {
  BuiltPrompts out;
  const auto& tok = *model.text.tokenizer;
  // A prompt of the whole context leaves no room to generate: tokenizing stops past it, so
  // an over-long prompt costs about a context's worth of work and memory, not its length.
  const auto context = static_cast<std::size_t>(std::max<std::int64_t>(model.max_context(), 1));
  auto too_long = [&](const char* param) {
    out.error = errors::context_length_exceeded(
        "the prompt is more than " + std::to_string(context) + " tokens but the context of '" + model.alias + "' is " +
            std::to_string(context) + " tokens, leaving no room to generate; shorten the prompt",
        param);
  };
  if (request.kind == CompletionKind::chat) {
    RenderedChat chat = render_chat(model, request.messages, true, "messages", chat_extras(request));
    if (chat.error) {
      out.error = std::move(chat.error);
      return out;
    }
    // The template writes the special tokens itself (transformers: add_special_tokens=False).
    auto ids = tok.encode_at_most(chat.text, false, context);
    if (!ids) {
      too_long("messages");
      return out;
    }
    out.prompts.push_back(std::move(*ids));
    out.texts.push_back(std::move(chat.text));
  } else {
    for (const auto& p : request.prompts) {
      if (p.is_tokens) {
        if (auto bad = check_token_ids(model, p.tokens, "prompt")) {
          out.error = std::move(bad);
          return out;
        }
        out.prompts.push_back(p.tokens);
        out.texts.push_back(tok.decode(p.tokens, {.skip_special_tokens = false, .clean_up_tokenization_spaces = {}}));
      } else {
        auto ids = tok.encode_at_most(p.text, true, context);
        if (!ids) {
          too_long("prompt");
          return out;
        }
        out.prompts.push_back(std::move(*ids));
        out.texts.push_back(p.text);
      }
    }
  }
  for (const auto& p : out.prompts) {
    if (p.empty()) {
      out.error = errors::invalid_request("invalid_value", "the prompt is empty (it encodes to 0 tokens)",
                                          request.kind == CompletionKind::chat ? "messages" : "prompt");
      return out;
    }
  }
  return out;
}

}  // namespace memra::server
