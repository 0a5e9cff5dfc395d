// Shared support for the tokenizer oracle tests: the model table, the corpus, and the reference ids and
// decodes produced by tests/tokenizer/oracle.mjs (run once per build tree and input set, then cached).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/tokenizer/tokenizer.hpp"
#include "tests/support/fixtures.hpp"

namespace memra::tokenizer::test {

struct ModelRef {
  std::string name;
  std::string dir;        // holds tokenizer.json and tokenizer_config.json
  std::string overrides;  // tests/tokenizer/variants/*.json merged over tokenizer.json ("" = none)
  // Which @lenml/tokenizers results are comparable (it does not implement everything the HF library does).
  bool lenml_encode = true;
  bool lenml_decode = true;
  bool lenml_random = true;  // decodes of random ids (lenml differs on invalid byte-fallback runs)
};

struct Row {
  std::vector<TokenId> ids, ids_plain;
  std::string decode, decode_skip, decode_plain;
};

struct RandomRow {
  std::vector<TokenId> ids;
  std::string lenml, lenml_skip, hf, hf_skip;
};

struct FuzzRow {
  std::string text;
  std::vector<TokenId> lenml, hf;
};

struct Oracle {
  std::vector<std::string> texts;  // the corpus, lone surrogates replaced by U+FFFD
  std::map<std::string, std::vector<Row>> lenml, hf;
  std::map<std::string, std::vector<RandomRow>> random;
  std::map<std::string, std::vector<FuzzRow>> fuzz;
  bool have_hf = false;
};

std::string node_dir();

// Every model the oracle covers (tiny only when the fixture exists).
const std::vector<ModelRef>& models();
const ModelRef* find_model(const std::string& name);

// The corpus (tests/tokenizer/corpus.jsonl) as UTF-8.
const std::vector<std::string>& corpus();

// The reference data, or nullptr with the reason (node or node_modules missing).
const Oracle* oracle(std::string& why_not);

// The tokenizer.json text of a model with its overrides applied.
std::string tokenizer_json_text(const ModelRef& m);
std::string read_text(const std::string& path);

// memra's tokenizer for a model (aborts the test on failure).
std::shared_ptr<const Tokenizer> load(const ModelRef& m);

// Printable form of a text for failure messages.
std::string show(const std::string& s);
std::string show(const std::vector<TokenId>& ids);

}  // namespace memra::tokenizer::test
