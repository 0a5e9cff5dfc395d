// The OpenAI response shapes memra-host answers with: chat.completion,
// chat.completion.chunk, text_completion (whole and streamed), usage, logprobs
// (the chat shape and the legacy completions shape), /tokenize, /detokenize and
// SSE error events. JSON stays inside openai_format.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/server/api_error.hpp"
#include "host/server/chat_output.hpp"
#include "host/server/generation.hpp"
#include "host/server/request_validation.hpp"
#include "host/tokenizer/tokenizer.hpp"

namespace memra::server {

struct ResponseMeta {
  CompletionKind kind = CompletionKind::chat;
  std::string id;           // chatcmpl-... / cmpl-...
  std::int64_t created = 0;
  std::string model;
  std::string fingerprint;  // system_fingerprint
  bool logprobs = false;
  std::int32_t top_logprobs = 0;
  const tokenizer::Tokenizer* tokenizer = nullptr;  // token strings for logprobs
};

struct UsageCounts {
  std::int64_t prompt = 0;
  std::int64_t completion = 0;
  std::int64_t cached = 0;
  // Speculative decoding (models served with it): completion_tokens_details gets
  // speculative_drafted_tokens / speculative_accepted_tokens.
  bool speculative = false;
  std::int64_t drafted = 0;
  std::int64_t accepted = 0;
  // Models that think: completion_tokens_details.reasoning_tokens.
  bool reasoning = false;
  std::int64_t reasoning_tokens = 0;
  // Prompt tokens written to the prefix cache (whole blocks it did not hold): Responses'
  // input_tokens_details.cache_write_tokens, Messages' cache_creation_input_tokens.
  std::int64_t cache_written = 0;
};

// One choice of a non-streamed answer, accumulated from ChoiceDeltas.
struct ChoiceResult {
  std::size_t index = 0;
  std::string prefix;  // echoed prompt (completions with echo)
  std::string text;                      // chat: the content
  std::string reasoning;                 // chat: reasoning_content
  std::vector<ToolCallOut> tool_calls;   // chat
  std::vector<TokenRecord> tokens;
  std::string finish_reason;
  std::optional<std::string> stop_sequence;  // the stop string that ended it, if one did
};

// What a chat stream event carries for one choice besides ChoiceDelta's content.
struct ChatDeltaExtras {
  std::string reasoning;
  std::vector<ToolCallOut> tool_calls;
};

std::string completion_body(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices,
                            const UsageCounts& usage);

// Streaming: one "data: {...}\n\n" event each.
// The first event of a chat choice: delta {"role":"assistant","content":""}.
std::string chat_role_event(const ResponseMeta& meta, std::size_t index, bool usage_null);
// Text and/or finish of one choice. `prefix`: text sent before the delta's text
// in this event (the echoed prompt, first event only); `echo_bytes`: the echoed
// prompt's length, which completions' text_offset counts from.
std::string delta_event(const ResponseMeta& meta, const ChoiceDelta& delta, const std::string& prefix,
                        std::size_t echo_bytes, bool usage_null, const ChatDeltaExtras* extras = nullptr);
// stream_options.include_usage: the last event before [DONE], with "choices": [].
std::string usage_event(const ResponseMeta& meta, const UsageCounts& usage);
// An error after the stream started: {"error":{...}}.
std::string error_event(const ApiError& error);
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

std::string tokenize_body(const std::vector<std::int32_t>& tokens, std::int64_t max_model_len);
std::string detokenize_body(const std::string& text);

// A fresh id: "<prefix>" + 24 random hex digits.
std::string random_id(const char* prefix);

}  // namespace memra::server
