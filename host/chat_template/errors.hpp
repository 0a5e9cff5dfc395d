// Internal error signalling. The interpreter is deeply recursive, so failures unwind as a C++ exception
// that never leaves the library: Template::render/compile catch it and return memra::Error.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "core/common/result.hpp"

namespace memra::chat_template {

#include <cstdint>

// A byte offset into the original template text; turned into line:column only when reporting.
struct Pos {
  static constexpr std::uint32_t kUnknown = 0xFFFFFFFFu;
  std::uint32_t offset = kUnknown;
  bool known() const { return offset != kUnknown; }
};

// 1-based line and column (in code points) of a byte offset in `source`.
struct LineCol {
  int line = 0;
  int col = 0;
};
LineCol line_col(std::string_view source, std::uint32_t offset);

struct TemplateError {
  ErrorCode code = ErrorCode::invalid_argument;
  std::string message;
  Pos pos;
  bool raised = false;  // from raise_exception(...)
};

[[noreturn]] inline void fail(std::string message, ErrorCode code = ErrorCode::invalid_argument) {
  throw TemplateError{code, std::move(message), {}, false};
}

[[noreturn]] inline void fail_at(Pos pos, std::string message, ErrorCode code = ErrorCode::invalid_argument) {
  throw TemplateError{code, std::move(message), pos, false};
}

}  // namespace memra::chat_template
