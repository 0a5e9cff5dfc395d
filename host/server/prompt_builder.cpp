#include "host/server/prompt_builder.hpp"

#include <nlohmann/json.hpp>

namespace memra::server {

RenderedChat render_chat(const ServedModel& model, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const char* param) {
  RenderedChat out;
  if (!model.text.chat_template) {
    out.error = errors::invalid_request("chat_template_missing",
                                        "the model '" + model.alias +
                                            "' ships no chat template, so it cannot chat; use /v1/completions "
                                            "with a prompt",
                                        std::string(param));
    return out;
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& m : messages) {
    nlohmann::ordered_json msg = {{"role", m.role}, {"content", m.content.value_or("")}};
    if (!m.name.empty()) msg["name"] = m.name;
    list.push_back(std::move(msg));
  }
  auto rendered = model.text.render_chat({{"messages", std::move(list)}, {"add_generation_prompt", add_generation_prompt}});
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
  if (request.kind == CompletionKind::chat) {
    RenderedChat chat = render_chat(model, request.messages, true);
    if (chat.error) {
      out.error = std::move(chat.error);
      return out;
    }
    // The template writes the special tokens itself (transformers: add_special_tokens=False).
    out.prompts.push_back(tok.encode(chat.text, false));
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
        out.prompts.push_back(tok.encode(p.text, true));
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
