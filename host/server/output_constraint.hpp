// The grammar a chat request's output must follow, when it asks for one:
// response_format json_object / json_schema, or tool_choice required / a named
// function (the call in the model's own tool format, its arguments matching the
// tool's parameter schema). Compiled against the model's vocabulary into a token
// constraint each sequence of the request gets a fresh copy of.
#pragma once

#include <optional>

#include "host/engine/token_constraint.hpp"
#include "host/server/api_error.hpp"
#include "host/server/reasoning_parser.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/served_model.hpp"
#include "host/server/tool_call_parser.hpp"

namespace memra::server {

struct OutputConstraint {
  engine::TokenConstraintFactory factory;  // empty: the output is free
  std::optional<ApiError> error;           // a 400 naming the field (unsupported keyword, bad schema)
};

// Where the model's thinking stands when the answer starts (chat requests of a model whose
// template thinks): the grammar then applies only after the thinking closes
// (structured/thinking_grammar.hpp), and a budget forces the close.
struct ThinkingGate {
  std::optional<ReasoningMarkers> markers;  // the model thinks in these
  bool starts_inside = false;               // the prompt opened the thinking
  bool may_open = false;                    // the model may open it (the prompt did not close it)
  std::optional<std::int64_t> budget;       // thinking_token_budget
  bool active() const { return markers && (starts_inside || may_open); }
};

// Whether the request constrains its output (response_format or a forced tool call).
bool wants_constraint(const CompletionRequest& request);

// `thinking`: the grammar waits for the thinking to close; with a budget and no grammar of its
// own, the answer is free text (the constraint only forces the close).
OutputConstraint output_constraint(ServedModel& model, const CompletionRequest& request, ToolFormat format,
                                   const ThinkingGate& thinking = {});

}  // namespace memra::server
