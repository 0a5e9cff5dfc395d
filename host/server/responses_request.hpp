// POST /v1/responses bodies (the OpenAI Responses API) translated into the chat
// request the shared engine path runs: `input` (a string, or message /
// function_call / function_call_output / reasoning items) becomes chat messages,
// `instructions` a system message in front, function tools and tool_choice their
// chat forms, `text.format` a response_format, `max_output_tokens` the token budget.
// The chat validator then checks the result, and its errors are renamed to the
// Responses fields (messages -> input, ...). Like every route, a field is honoured,
// harmless or refused by name (docs/SERVING.md, "/v1/responses").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/server/api_error.hpp"
#include "host/server/request_validation.hpp"

namespace memra::server {

struct ResponsesRequest {
  nlohmann::ordered_json chat;      // the chat body, its "messages" the input alone (no instructions, no history)
  nlohmann::ordered_json echo;      // the Response object's fields that repeat the request
  std::optional<std::string> previous_response_id;
  std::optional<std::string> instructions;
  bool store = true;
  bool stream = false;
};

Parsed<ResponsesRequest> parse_responses_body(std::string_view body);

// The chat request to run: the instructions (a system message), then `history` (the
// stored conversation of previous_response_id: chat messages), then the input.
Validation responses_chat_request(const ResponsesRequest& request, const nlohmann::ordered_json& history);

// Every top-level field /v1/responses knows and its policy ("honoured", "harmless",
// "neutral only"), as docs/SERVING.md lists them.
std::vector<std::pair<std::string, std::string>> responses_field_policies();

}  // namespace memra::server
