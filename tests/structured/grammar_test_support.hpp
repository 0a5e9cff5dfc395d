// Helpers the structured-output tests share: compile a schema (the test fails if it is
// refused), whether a grammar takes a text whole, the refusal of a schema, and random
// sentences of a grammar (a walk that picks, at each step, one of the bytes the grammar
// allows next: what a model under a working mask can write).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "host/structured/json_grammar.hpp"

namespace memra::structured::testing {

using json = nlohmann::ordered_json;

inline Grammar compile(const std::string& schema_text) {
  SchemaError e;
  auto g = grammar_for_schema(json::parse(schema_text), &e);
  EXPECT_TRUE(g.ok()) << schema_text << ": " << (g.ok() ? "" : g.error().message);
  return g ? std::move(*g) : Grammar{};
}

inline bool accepts(const Grammar& g, std::string_view text) {
  if (g.rules.empty()) return false;
  MatchState s = MatchState::start(g).advance(g, text);
  return !s.dead() && s.complete();
}

inline SchemaError refusal(const json& schema) {
  SchemaError e;
  auto g = grammar_for_schema(schema, &e);
  EXPECT_FALSE(g.ok()) << schema.dump().substr(0, 200);
  return e;
}

// A random sentence of `g`: stops at a complete state with probability 1/4 per step, always
// once `soft_limit` bytes are written (then preferring a closing '"' or ']' or '}' when
// allowed, so unbounded strings and arrays end). "" if no sentence ends within 8x the limit.
inline std::string random_sentence(const Grammar& g, std::mt19937& rng, size_t soft_limit = 40) {
  MatchState st = MatchState::start(g);
  std::string out;
  while (out.size() < 8 * soft_limit) {
    std::vector<uint8_t> next;
    for (int b = 0; b < 256; ++b)
      if (!st.advance(g, static_cast<uint8_t>(b)).dead()) next.push_back(static_cast<uint8_t>(b));
    if (st.complete() && (next.empty() || out.size() >= soft_limit || rng() % 4 == 0)) return out;
    if (next.empty()) return "";
    uint8_t pick = next[std::uniform_int_distribution<size_t>(0, next.size() - 1)(rng)];
    if (out.size() >= soft_limit)
      for (uint8_t closer : {'"', ']', '}'})
        if (std::find(next.begin(), next.end(), closer) != next.end()) pick = closer;
    st = st.advance(g, pick);
    out.push_back(static_cast<char>(pick));
  }
  return "";
}

}  // namespace memra::structured::testing
