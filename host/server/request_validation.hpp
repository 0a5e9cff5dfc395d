// Parses and shape-checks the JSON bodies of the OpenAI-compatible inference
// routes, so client mistakes become precise 400s (with "param" naming the field)
// before any engine work. Only the shape is checked here; what a model can do
// (context length, tools) is the engine's business.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "host/server/api_error.hpp"

namespace memra::server {

enum class CompletionKind { chat, text };  // /v1/chat/completions, /v1/completions

struct CompletionRequest {
  CompletionKind kind = CompletionKind::chat;
  std::string model;
  bool stream = false;
};

struct Validation {
  std::optional<CompletionRequest> request;  // set when the body is acceptable
  std::optional<ApiError> error;             // set otherwise (a 400)
};

// Nesting deeper than this is refused before parsing (guards recursion in consumers).
inline constexpr std::size_t kMaxJsonDepth = 64;

// The deepest nesting of arrays/objects in `text` (strings are skipped); stops
// counting once `limit` is passed.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

Validation validate_completion_body(CompletionKind kind, std::string_view body);

}  // namespace memra::server
