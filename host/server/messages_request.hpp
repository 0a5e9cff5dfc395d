// POST /v1/messages bodies (the Anthropic Messages API) translated into the chat
// request the shared engine path runs: `system` becomes a system message, content
// blocks their chat forms (text joined, tool_use an assistant tool call with its
// input as JSON arguments, tool_result a tool message, thinking the turn's
// reasoning), `tools` with `input_schema` function tools, `tool_choice`
// auto/any/tool/none the chat choices, `stop_sequences` stop strings. The chat
// validator then checks the result. Errors are ApiErrors; the route renders them
// in Anthropic's shape (messages_format.hpp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/server/request_validation.hpp"

namespace memra::server {

struct MessagesRequest {
  CompletionRequest chat;  // validated
  bool stream = false;
};

Parsed<MessagesRequest> parse_messages_body(std::string_view body);

// Every top-level field /v1/messages knows and its policy, as docs/SERVING.md lists them.
std::vector<std::pair<std::string, std::string>> messages_field_policies();

}  // namespace memra::server
