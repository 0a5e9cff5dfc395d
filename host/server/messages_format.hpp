// The Anthropic Messages API's answers: the Message object (content blocks
// thinking, text, tool_use; stop_reason end_turn / max_tokens / stop_sequence /
// tool_use; usage), its event stream (message_start, content_block_start,
// content_block_delta with text_delta / thinking_delta / input_json_delta,
// content_block_stop, message_delta with stop_reason and usage, message_stop; an
// `error` event when it fails), and errors in Anthropic's shape:
//   {"type":"error","error":{"type":"invalid_request_error","message":"..."}}
#pragma once

#include <memory>
#include <string>

#include "host/server/completion_pipeline.hpp"

namespace memra::server {

// The Anthropic error body for an ApiError (its type from the status; the param, if
// any, in front of the message as Anthropic writes it: "max_tokens: ...").
// `request_id`: the request's, as Anthropic's error bodies carry it (null without).
std::string anthropic_error_body(const ApiError& error, const std::optional<std::string>& request_id = std::nullopt);
// An error reply in that shape (with Retry-After for a refusal that has one).
Reply anthropic_error_reply(const ApiError& error, std::optional<std::int64_t> retry_after = std::nullopt);

std::string message_body(const ResponseMeta& meta, const ChoiceResult& answer, const UsageCounts& usage);

std::unique_ptr<StreamFormat> messages_stream();

}  // namespace memra::server
