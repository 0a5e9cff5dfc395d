// JSON Schema (and plain JSON) compiled to a byte grammar (grammar.hpp), for
// response_format json_object / json_schema and forced tool-call arguments. The
// output is JSON that validates against the schema; whitespace is allowed only after
// '{', '[', ',' and ':' and before '}' and ']' (at most one space, or a newline and up
// to 24 spaces/tabs: bounded, so a model cannot pad forever).
//
// Supported keywords: type (one or a list), enum, const, anyOf, oneOf (as anyOf: a
// grammar cannot exclude the other branches), allOf with one schema, $ref to "#" or a
// JSON pointer inside the document ($defs, definitions; recursion allowed), properties,
// required, additionalProperties (objects with properties produce exactly the listed
// ones, which validates whatever additionalProperties says; without properties it
// decides between {} and a map), items, prefixItems, minItems, maxItems, minLength,
// maxLength (code points; an escape is one), pattern and format (date, time, date-time,
// duration, email, hostname, ipv4, ipv6, uuid) as automata (string_automaton.hpp),
// minimum, maximum, exclusiveMinimum, exclusiveMaximum as exact decimal ranges
// (number_grammar.hpp), and the annotations title, description, default, examples,
// $schema, $id, $comment, deprecated, readOnly, writeOnly. Anything else (multipleOf,
// uniqueItems, patternProperties, ...) is refused with a SchemaError naming the keyword
// and where it is: never silently ignored; so is what a keyword asks that cannot be
// compiled (a lookahead in a pattern, a bound no writable number meets).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/common/result.hpp"
#include "host/structured/grammar.hpp"
#include "host/structured/grammar_matcher.hpp"

namespace memra::structured {

// The most grammar elements one request's constraint may compile to (docs/SERVING.md,
// "Request limits"): about 8 bytes each, so a grammar stays under ~10 MB.
inline constexpr uint64_t kMaxGrammarElements = 1'000'000;
// The most distinct '$ref' targets one schema may use (resolved one after another, never
// by recursion; the bound keeps a 200 KB chain of definitions a 400).
inline constexpr size_t kMaxSchemaRefs = 1'000;
// The most values of one 'enum' and schemas of one 'anyOf' / 'oneOf': a match keeps at most
// kMaxStacks alternatives alive, so a wider choice could not be enforced whole.
inline constexpr size_t kMaxAlternatives = kMaxStacks;  // 4,096

struct SchemaError {
  std::string keyword;  // the offending keyword ("" for a structural problem)
  std::string pointer;  // JSON pointer of the schema node ("" = the root)
  std::string message;  // complete sentence naming both
  bool unsupported = true;  // false: the schema is invalid rather than beyond memra
};

// Compiles schemas into one GrammarBuilder, so several (one per tool) share a grammar.
class JsonGrammarCompiler {
 public:
  explicit JsonGrammarCompiler(GrammarBuilder& builder);
  // A rule matching the JSON values `schema` accepts; `schema` must outlive the compiler.
  std::optional<SchemaError> compile(const nlohmann::ordered_json& schema, uint32_t& rule);
  // A rule matching any JSON value / any JSON object.
  uint32_t any_value();
  uint32_t any_object();
  // Optional whitespace as described above.
  ExprPtr ws();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Convenience: a whole grammar for one schema (root = the value) or for any JSON object.
Result<Grammar> grammar_for_schema(const nlohmann::ordered_json& schema, SchemaError* error = nullptr);
Grammar grammar_for_any_object();

}  // namespace memra::structured
