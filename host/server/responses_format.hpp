// The OpenAI Responses API's answers: the Response object (output items: reasoning,
// message with output_text, function_call) and its stream of named events, each
// with a sequence_number: response.created, response.in_progress,
// response.output_item.added, response.content_part.added,
// response.output_text.delta / .done (response.reasoning_text.* for thinking),
// response.function_call_arguments.delta / .done, response.content_part.done,
// response.output_item.done, then response.completed (response.incomplete when
// max_output_tokens cut it, response.failed on an error).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "host/server/completion_pipeline.hpp"

namespace memra::server {

struct ResponseHead {
  std::string id;  // resp_...
  std::int64_t created_at = 0;
  std::string model;
  nlohmann::ordered_json echo;  // ResponsesRequest::echo
};

// The whole Response object for a finished answer.
std::string response_body(const ResponseHead& head, const ChoiceResult& answer, const UsageCounts& usage);

// The answer as the chat messages a later previous_response_id continues from.
nlohmann::ordered_json assistant_messages(const ChoiceResult& answer);

// What a finished answer is stored as: the answer and its whole Response object.
using ResponseDone = std::function<void(const ChoiceResult& answer, const std::string& response)>;

// The event stream; `on_done` gets the whole answer once it completed (to store it).
std::unique_ptr<StreamFormat> responses_stream(ResponseHead head, ResponseDone on_done);

}  // namespace memra::server
