#include "host/tools/memra-bench/mask_bench.hpp"

#include <cstdio>
#include <memory>

#include "host/structured/grammar_constraint.hpp"
#include "host/structured/json_grammar.hpp"
#include "host/structured/token_vocabulary.hpp"
#include "host/tools/memra-bench/serve_bench.hpp"

namespace memra::bench {

int run_mask_bench(engine::Engine& e, const engine::TextModel& text, const std::vector<int>& concurrency, int prompt,
                   int decode, int repeats) {
  auto vocab = structured::TokenVocabulary::build(*text.tokenizer, e.vocab_size(), text.stop_ids);
  auto grammar = std::make_shared<const structured::CompiledGrammar>(structured::grammar_for_any_object(), vocab);
  ServeBenchOptions plain;
  plain.concurrency = concurrency;
  plain.prompt = prompt;
  plain.decode = decode;
  plain.repeats = repeats;
  ServeBenchOptions masked = plain;
  masked.constraint = [grammar] { return grammar->constraint(grammar); };
  masked.stop_ids = text.stop_ids;
  masked.label = "json_object mask";
  std::vector<ServeFigure> a, b;
  if (const int rc = run_serve_bench(e, plain, &a); rc != 0) return rc;
  if (const int rc = run_serve_bench(e, masked, &b); rc != 0) return rc;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    std::printf("mask cost concurrency %d: %.1f tok/s plain, %.1f tok/s under the json_object mask: %.1f %% slower\n",
                a[i].concurrency, a[i].tok_s, b[i].tok_s, 100.0 * (1.0 - b[i].tok_s / a[i].tok_s));
  return 0;
}

}  // namespace memra::bench
