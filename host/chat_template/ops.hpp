// Value semantics shared by the interpreter and the filters, each named after the JavaScript operation
// of @huggingface/jinja it reproduces. Failures throw TemplateError (see errors.hpp).
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "host/chat_template/value.hpp"

namespace memra::chat_template {

// RuntimeValue.toString(): what `{{ value }}` and the `string` filter print.
std::string to_output_string(const Value& v);
// String(value.value): what `~`, `+` with a string, and raise_exception see.
std::string js_string(const Value& v);
// Array.prototype.join on the raw values (null/undefined items become "").
std::string js_join(const std::vector<Value>& items, std::string_view separator);

bool loose_equals(const Value& a, const Value& b);     // a.value == b.value
bool strict_equals(const Value& a, const Value& b);    // a.value === b.value
bool same_value_zero(const Value& a, const Value& b);  // Set membership of a.value

// compareRuntimeValues: -1/0/1, throws for incomparable types (as sort/dictsort do).
int compare_values(const Value& a, const Value& b, bool case_sensitive);

struct JsonOptions {
  double indent = 0;  // 0: compact
  bool ensure_ascii = false;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};
// The reference's toJSON: JSON.stringify spacing (", " and ": "), insertion key order, no HTML escaping.
std::string to_json(const Value& v, const JsonOptions& options, bool undefined_to_null);

// Throws when v is a raw JS undefined, naming what was attempted.
void require_present(const Value& v, const char* what);

}  // namespace memra::chat_template
