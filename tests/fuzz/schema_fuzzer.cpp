// libFuzzer target: a schema (JSON text, parsed under the client limits) compiled to a
// grammar as response_format / tool parameters are, then the grammar started and run over
// the input's own bytes. Nothing may crash, recurse without bound, or pass the element
// limit; a refusal names a keyword or says why.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "host/json/bounded_parse.hpp"
#include "host/structured/grammar_matcher.hpp"
#include "host/structured/json_grammar.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace memra::structured;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // "schema\x00sample": the schema, then bytes to match against its grammar.
  const std::size_t cut = text.find('\0');
  const auto schema = memra::jsonio::parse(text.substr(0, cut));
  if (!schema) return 0;
  SchemaError error;
  auto grammar = grammar_for_schema(*schema, &error);
  if (!grammar) {
    if (error.message.empty()) std::abort();
    return 0;
  }
  if (grammar->elements.size() > kMaxGrammarElements) std::abort();
  MatchState state = MatchState::start(*grammar);
  if (cut != std::string_view::npos) {
    for (char c : text.substr(cut + 1)) {
      state = state.advance(*grammar, static_cast<std::uint8_t>(c));
      if (state.dead()) break;
    }
  }
  (void)state.complete();
  return 0;
}
