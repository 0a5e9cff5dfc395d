// JSON text from clients parsed under limits: the one parser for every string the
// server parses (request bodies, tool-call arguments, schemas inside them, chat-template
// contexts). It runs nlohmann's iterative SAX parser and builds the document itself, so
// - nesting past `max_depth` stops the parse at the opening bracket (nothing a consumer
//   does later — copy, dump, compare, destroy, compile — recurses deeper than that);
// - objects are built in linear time (a hash index per large object finds duplicate
//   keys; the last one wins, as nlohmann's parse), and an object's key count and an
//   array's length are limited while parsing, before the document exists;
// - the document's memory is estimated as it grows and the parse stops past a budget.
// docs/SERVING.md ("Request limits") lists the limits the server applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace memra::jsonio {

struct Limits {
  std::size_t max_depth = 64;                  // arrays and objects nested inside each other
  std::size_t max_object_keys = 10'000;        // keys of one object
  std::size_t max_array_items = 1'048'576;     // items of one array
  std::size_t max_memory_bytes = 64u << 20;    // the built document, estimated
};

// The limits the server applies to every JSON text a client sends.
inline constexpr Limits kRequestLimits{};

struct ParseError {
  enum class Kind { syntax, depth, object_keys, array_items, memory };
  Kind kind = Kind::syntax;
  std::string message;  // complete, without the field (e.g. "nesting deeper than 64 levels")
  std::string path;     // where: "messages[2].content" style ("" = the top level)
};

// `text` as a document, or nullopt with `*error` set (when given).
std::optional<nlohmann::ordered_json> parse(std::string_view text, const Limits& limits = kRequestLimits,
                                            ParseError* error = nullptr);

// The first component of a path ("messages" of "messages[2].content"): a request's field.
std::string top_field(std::string_view path);

}  // namespace memra::jsonio
