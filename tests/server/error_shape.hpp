// Test helper: checks that a reply is an OpenAI-shaped JSON error.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace memra::server::testing {

// Content-Type application/json and {"error":{"message":non-empty string,
// "type":string,"code":`code`,"param":string|null}}; `param` "" = expect null.
::testing::AssertionResult is_openai_error(const std::string& content_type, const std::string& body,
                                           const std::string& code, const std::string& param = "");
// The same shape with any non-empty code and any param (string or null).
::testing::AssertionResult is_any_openai_error(const std::string& content_type, const std::string& body);
// Anthropic's shape (/v1/messages): {"type":"error","error":{"type":`type` (any when ""),
// "message":non-empty string},"request_id":string or null} and nothing else at the top.
::testing::AssertionResult is_anthropic_error(const std::string& content_type, const std::string& body,
                                              const std::string& type = "");

}  // namespace memra::server::testing
