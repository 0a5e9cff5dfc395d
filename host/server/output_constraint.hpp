// The grammar a chat request's output must follow, when it asks for one:
// response_format json_object / json_schema, or tool_choice required / a named
// function (the call in the model's own tool format, its arguments matching the
// tool's parameter schema). Compiled against the model's vocabulary into a token
// constraint each sequence of the request gets a fresh copy of.
#pragma once

#include <optional>

#include "host/engine/token_constraint.hpp"
#include "host/server/api_error.hpp"
#include "host/server/request_validation.hpp"
#include "host/server/served_model.hpp"
#include "host/server/tool_call_parser.hpp"

namespace memra::server {

struct OutputConstraint {
  engine::TokenConstraintFactory factory;  // empty: the output is free
  std::optional<ApiError> error;           // a 400 naming the field (unsupported keyword, bad schema)
};

// Whether the request constrains its output (response_format or a forced tool call).
bool wants_constraint(const CompletionRequest& request);

OutputConstraint output_constraint(ServedModel& model, const CompletionRequest& request, ToolFormat format);

}  // namespace memra::server
