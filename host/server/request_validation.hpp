// Parses and checks the JSON bodies of the OpenAI-compatible routes, so client
// mistakes become precise 400s (with "param" naming the field) before any
// engine work. Every field is either honoured, accepted as harmless, or refused
// by name: nothing a client asks for is silently ignored (docs/SERVING.md,
// "Request fields"). What depends on the model (vocabulary, context length) is
// checked later, by the route.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/engine/sampler.hpp"
#include "host/json/bounded_parse.hpp"
#include "host/server/api_error.hpp"

namespace memra::server {

enum class CompletionKind { chat, text };  // /v1/chat/completions, /v1/completions

// A tool call of an earlier assistant turn, as the client sends it back.
struct ToolCallIn {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the API carries it
  std::optional<nlohmann::ordered_json> parsed;  // the arguments parsed (jsonio limits), when they are JSON
};

struct ChatMessage {
  std::string role;                    // "developer" is passed to the template as "system"
  std::optional<std::string> content;  // text parts joined with "\n"; absent only for assistant turns
  std::string name;                    // optional participant name ("" = none)
  std::vector<ToolCallIn> tool_calls;  // assistant turns
  std::string tool_call_id;            // tool turns: the call this answers
  std::optional<std::string> reasoning_content;  // assistant turns: their thinking, for templates that show it
};

// One entry of "tools" (type "function").
struct ToolDef {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema object ({} when absent)
  bool strict = false;
  nlohmann::ordered_json raw;         // {"type":"function","function":{...}} as sent: what the template sees
};

enum class ToolChoiceMode { none, automatic, required, named };
struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::none;  // default: automatic when tools are given, else none
  std::string name;                            // named
};

enum class ResponseFormatType { text, json_object, json_schema };
struct ResponseFormat {
  ResponseFormatType type = ResponseFormatType::text;
  std::string name;                // json_schema.name
  nlohmann::ordered_json schema;   // json_schema.schema ({} when absent: any JSON value)
  bool strict = false;
};

// One prompt of /v1/completions: text or token ids.
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<std::int32_t> tokens;
};

struct CompletionRequest {
  CompletionKind kind = CompletionKind::chat;
  std::string model;
  bool stream = false;
  bool include_usage = false;            // stream_options.include_usage
  std::vector<ChatMessage> messages;     // chat
  std::vector<PromptInput> prompts;      // completions (one choice group per prompt)
  std::optional<std::int64_t> max_tokens;  // max_tokens / max_completion_tokens; unset = the context left
  std::vector<std::string> stop;
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<std::uint64_t> seed;
  std::int64_t n = 1;
  bool logprobs = false;                 // chat: logprobs; completions: logprobs given (>= 0)
  std::int32_t top_logprobs = 0;         // chat: top_logprobs; completions: the logprobs integer
  bool echo = false;                     // completions
  bool ignore_eos = false;               // extension: keep generating past the model's end-of-text
  std::string user;
  std::string cache_salt;
  std::vector<engine::LogitBias> logit_bias;          // ascending ids (in the vocabulary: checked by the route)
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();  // extra template variables
  std::optional<std::string> reasoning_effort;        // none, minimal, low, medium, high
  std::optional<std::int64_t> thinking_token_budget;  // extension (vLLM's): the close marker is forced after this many thinking tokens
  std::vector<ToolDef> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ResponseFormat response_format;
};

struct Validation {
  std::optional<CompletionRequest> request;  // set when the body is acceptable
  std::optional<ApiError> error;             // set otherwise (a 400)
};

// POST /tokenize: {"model", "prompt" | "messages", "add_special_tokens"}.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;
  std::vector<ChatMessage> messages;     // used when prompt is unset
  std::optional<bool> add_special_tokens;  // default: true for a prompt, false for messages
  bool add_generation_prompt = true;     // messages only
};

// POST /detokenize: {"model", "tokens"}.
struct DetokenizeRequest {
  std::string model;
  std::vector<std::int64_t> tokens;
};

template <typename T>
struct Parsed {
  std::optional<T> value;
  std::optional<ApiError> error;
};

// Limits on a request's shape (each a 400 naming the field when passed).
inline constexpr std::int64_t kMaxChoices = 16;        // n
inline constexpr std::size_t kMaxPrompts = 64;         // prompts x n in one /v1/completions request
inline constexpr std::size_t kMaxStops = 4;
inline constexpr std::size_t kMaxStopBytes = 256;
inline constexpr std::size_t kMaxMessages = 4096;
inline constexpr std::int32_t kMaxTopLogprobs = 20;
inline constexpr std::size_t kMaxLogitBias = 1024;     // logit_bias entries
inline constexpr std::size_t kMaxTools = 128;

// A 400 for JSON a client sent that jsonio::parse refused: `what` says which text ("the
// request body", "the tool call's arguments"), `param` names its field ("" for the body,
// whose top-level field in the error's path is named instead).
ApiError json_parse_error(const jsonio::ParseError& e, std::string_view what, std::string param = "");

Validation validate_completion_body(CompletionKind kind, std::string_view body);
// The same checks on a body already parsed (the Responses and Messages routes translate
// their bodies into a chat body and validate that).
Validation validate_completion_json(CompletionKind kind, const nlohmann::ordered_json& body);
// `body` parsed as one JSON object under the limits every route applies (empty, nesting,
// syntax, not an object: `error` set, a 400).
std::optional<nlohmann::ordered_json> parse_json_body(std::string_view body, std::optional<ApiError>& error);
// Every top-level field a route knows, with what the validator does with it:
// "honoured", "harmless" or "neutral only" (docs/SERVING.md, "Every field at a glance").
std::vector<std::pair<std::string, std::string>> field_policies(CompletionKind kind);
Parsed<TokenizeRequest> parse_tokenize_body(std::string_view body);
Parsed<DetokenizeRequest> parse_detokenize_body(std::string_view body);

}  // namespace memra::server
