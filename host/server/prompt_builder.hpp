// Turns a request's messages or prompts into token ids with the model's chat
// template and tokenizer; every failure is a client error naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/server/api_error.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/served_model.hpp"

namespace memra::server {

struct BuiltPrompts {
  std::vector<std::vector<std::int32_t>> prompts;  // one per prompt (chat: exactly one)
  std::vector<std::string> texts;                  // each prompt as text (completions' echo)
  std::optional<ApiError> error;
};

BuiltPrompts build_prompts(const ServedModel& model, const CompletionRequest& request);

// The chat rendered with the model's template (add_generation_prompt as given).
struct RenderedChat {
  std::string text;
  std::optional<ApiError> error;
};
// What a chat request adds to the template's variables besides the messages.
struct ChatExtras {
  const std::vector<ToolDef>* tools = nullptr;  // rendered when non-empty
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // chat_template_kwargs
  std::optional<std::string> reasoning_effort;
};
ChatExtras chat_extras(const CompletionRequest& request);

RenderedChat render_chat(const ServedModel& model, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt, const char* param = "messages", const ChatExtras& extras = {});

// A 400 naming `param` when an id is outside the model's vocabulary, else nullopt.
std::optional<ApiError> check_token_ids(const ServedModel& model, const std::vector<std::int32_t>& ids,
                                        const char* param);

}  // namespace memra::server
