// A model's text side: its tokenizer (tokenizer.json, or the vocabulary a GGUF
// embeds), its chat template and its stop ids — what turns a chat or a prompt
// into token ids and generated ids back into text.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "host/chat_template/chat_template.hpp"
#include "core/common/result.hpp"
#include "host/tokenizer/tokenizer.hpp"
#include "repack/checkpoint/model_config.hpp"

namespace memra::engine {

struct TextModel {
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::optional<chat_template::Template> chat_template;  // absent when the model ships none
  std::vector<int32_t> stop_ids;                         // EOS ids from the config and the tokenizer

  // Renders `messages` (and optional tools / flags in `context`) with the chat template.
  Result<std::string> render_chat(const nlohmann::ordered_json& context) const;
};

// The tokenizer of `path`: a model directory (Hugging Face or .memra) holding
// tokenizer.json, a tokenizer.json file itself, or a .gguf (its embedded vocabulary).
Result<std::shared_ptr<const tokenizer::Tokenizer>> load_tokenizer(const std::string& path);

// A chat template read from a Jinja file (--chat-template), compiled; errors name the file.
Result<chat_template::Template> load_chat_template_file(const std::string& path);

// `path` is what the engine opened: a Hugging Face directory or a .gguf file.
Result<TextModel> load_text_model(const std::string& path, const ModelConfig& config);

}  // namespace memra::engine
