// memra::chat_template — renders Hugging Face chat templates (the Jinja2 subset they use) exactly as
// @huggingface/jinja does, byte for byte: same whitespace handling (trim_blocks + lstrip_blocks, `-`
// markers, the transformers `{% generation %}` tag), same stringification of numbers, booleans and none,
// same `tojson` spacing/escaping and the same quirks (e.g. `strip('\n')` strips all whitespace).
//
// Where @huggingface/jinja would fail for lack of a feature that Jinja2 has (filters such as `round`,
// `select`, `escape`, `count`, bare `default`, the `dict(...)` global, ...) memra implements the Jinja2
// behaviour instead; everything @huggingface/jinja does render, memra renders identically. Anything else
// (unknown statement, filter, test or method, a type error, `raise_exception(...)`) is an Error naming the
// line, column and construct — never a silently different rendering.
//
// Usage:
//   auto tpl = memra::chat_template::compile(tokenizer_config["chat_template"]);
//   if (!tpl) return tpl.error();
//   auto text = tpl->render(context);   // context: {"messages": [...], "tools": [...],
//                                       //   "add_generation_prompt": true, "enable_thinking": false,
//                                       //   "bos_token": "<s>", "eos_token": "</s>", ...any extra kwargs}
//
// Known, deliberate differences from @huggingface/jinja (each an Error, never different text):
//   - printing a function or macro object (the reference prints its JavaScript source);
//   - `x ** y` whose exact result is not a double (V8's pow rounds differently from the C library).
// Not reproduced: indexing a string in the middle of a surrogate pair yields a lone surrogate, which memra
// emits as WTF-8; strftime_now always uses English month names (Node follows its default locale).
//
// Thread safety: a compiled Template is immutable; render() may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.hpp"

namespace memra::chat_template {

// Guards against runaway templates; exceeding one is an Error that names the limit.
struct Limits {
  std::size_t max_output_bytes = std::size_t{32} << 20;  // the rendered text and any string built on the way
  std::size_t max_call_depth = 200;                      // nested macro / caller() calls
  std::uint64_t max_loop_iterations = 5'000'000;         // for-loop iterations + range() items, per render
};

struct RenderOptions {
  Limits limits;
  // The clock strftime_now() reads (seconds since the epoch, formatted in the process's local time zone,
  // as Node does). Unset: the system clock. Set it for reproducible prompts and tests.
  std::optional<std::int64_t> now_unix_seconds;
};

namespace detail {
struct Compiled;
}

class Template {
 public:
  // `context` must be a JSON object; each key becomes a template variable in key order. JSON object key
  // order is significant (tojson keeps it), which is why this takes ordered_json. Keys that clash with the
  // template globals (true, false, none, True, False, None, range, namespace, raise_exception,
  // strftime_now) are rejected, as @huggingface/jinja rejects them.
  //
  // Errors: ErrorCode::invalid_argument for everything that depends on the input — a
  // `raise_exception(msg)` call (message "chat template raise_exception at line L, column C: msg"), a
  // type error, an exceeded limit; ErrorCode::unsupported for a construct memra does not implement.
  Result<std::string> render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  // Same, with the context given as JSON text (parsed keeping key order).
  Result<std::string> render_json_text(std::string_view context_json, const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  friend Result<Template> compile(std::string_view template_text);
  std::shared_ptr<const detail::Compiled> impl_;
};

// Lexes and parses a template. Syntax errors (unclosed block, unknown statement such as {% include %},
// bad expression) are Errors with line and column; unknown filters/tests/methods are only detected when a
// render reaches them, as in @huggingface/jinja (a branch never taken cannot fail).
Result<Template> compile(std::string_view template_text);

// True when `error` came from the template calling raise_exception(...) (the conversation broke a rule
// the template enforces, e.g. roles must alternate) rather than from memra or a malformed template.
bool is_raised_exception(const Error& error);

}  // namespace memra::chat_template
