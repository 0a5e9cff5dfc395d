// The structured-output grammar: JSON Schema compiled to a byte grammar accepts the
// JSON the schema allows and refuses the rest (nlohmann::json is the oracle for JSON
// syntax), refuses unsupported keywords by name, and the trie-walk token mask equals a
// brute-force mask (every token's bytes run through the matcher) on a real vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "host/json/bounded_parse.hpp"
#include "host/structured/grammar_constraint.hpp"
#include "host/structured/json_grammar.hpp"
#include "host/tokenizer/tokenizer.hpp"
#include "tests/structured/grammar_test_support.hpp"
#include "tests/support/fixtures.hpp"

namespace fs = std::filesystem;
using namespace memra::structured;
using namespace memra::structured::testing;
using json = nlohmann::ordered_json;

TEST(JsonGrammar, AcceptsWhatTheSchemaAllowsAndNothingElse) {
  struct Case {
    const char* schema;
    std::vector<const char*> good, bad;
  };
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})",
       {R"({"name":"Ada","age":36})", "{\"name\": \"A\\\"b\", \"age\": -7}", "{\n  \"name\": \"x\",\n  \"age\": 0\n}"},
       {R"({"age":36,"name":"Ada"})", R"({"name":"Ada"})", R"({"name":"Ada","age":3.5})", R"({"name":"Ada","age":036})",
        R"({"name":"Ada","age":1,"x":1})", R"( {"name":"Ada","age":1})", R"({"name":Ada,"age":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":["x",1,[2]]}}})",
       {"{}", R"({"a":true})", R"({"b":null,"c":[2]})", R"({"a":false,"b":null,"c":"x"})", R"({"c":1})"},
       {R"({"b":null,"a":true})", R"({"a":1})", R"({"c":"y"})", R"({,"a":true})", R"({"a":true,})"}},
      {R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3})",
       {"[1]", "[1.5,-2e10,3E+2]", "[ 0.25 ]"},
       {"[]", "[1,2,3,4]", "[1,]", "[01]", "[1.]", "[.5]"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", "\"\\u00e9\\n\"", "\"\xc3\xa9\xe2\x82\xac\""},
       {R"("a")", R"("abcd")", "\"a\nb\"", "\"\xc3\"", "\"\xff\xfe\""}},
      {R"({"anyOf":[{"type":"integer"},{"type":"string","format":"date"}]})",
       {"12", R"("2024-02-29")"},
       {R"("2024-13-01")", R"("24-01-01")", "1.5"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"const":{"k":[1,true]}}],"items":false})",
       {R"(["a",{"k":[1,true]}])"},
       {R"(["a"])", R"(["a",{"k":[1,false]}])", R"(["a",{"k":[1,true]},3])"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567e89b12d3a456426614174000")"}},
      {R"({"type":"string","format":"date-time"})", {R"("2024-05-01T13:45:00Z")", R"("2024-05-01T13:45:00.123+02:00")"}, {R"("2024-05-01 13:45:00")"}},
      {"true", {"1", "\"x\"", "[{},[]]", "{\"a\":{\"b\":null}}"}, {"[", "tru", "{\"a\"}"}},
  };
  for (const auto& c : cases) {
    const Grammar g = compile(c.schema);
    for (const char* s : c.good) {
      EXPECT_TRUE(json::accept(s)) << "test data is not JSON: " << s;
      EXPECT_TRUE(accepts(g, s)) << c.schema << "\n  should accept: " << s;
    }
    for (const char* s : c.bad) EXPECT_FALSE(accepts(g, s)) << c.schema << "\n  should refuse: " << s;
  }
}

TEST(JsonGrammar, AnyObjectIsExactlyJsonObjects) {
  const Grammar g = grammar_for_any_object();
  for (const char* s : {"{}", R"({"a":[1,{"b":"c"},null,true,-0.5e-3]})", "{ \"k\": \"v\" }"}) EXPECT_TRUE(accepts(g, s)) << s;
  for (const char* s : {"[]", "1", R"({"a":})", R"({'a':1})", "{\"a\":1}}", "{\"a\":NaN}"}) EXPECT_FALSE(accepts(g, s)) << s;
}

TEST(JsonGrammar, UnsupportedKeywordsAreNamedWithTheirPlace) {
  struct Case {
    const char* schema;
    const char* keyword;
    const char* pointer;
  };
  for (const auto& c : std::vector<Case>{
           {R"J({"type":"string","pattern":"^(?=a)"})J", "pattern", ""},
           {R"({"type":"object","properties":{"n":{"type":"integer","minimum":0,"multipleOf":2}}})", "multipleOf", "/properties/n"},
           {R"({"type":"array","items":{"type":"string","format":"uri"}})", "format", "/items"},
           {R"({"type":"object","minProperties":1})", "minProperties", ""},
           {R"({"type":"array","contains":{"type":"integer"}})", "contains", ""},
           {R"({"allOf":[{"type":"string"},{"maxLength":2}]})", "allOf", ""},
           {R"({"$ref":"https://example.com/s.json"})", "$ref", ""},
           {R"({"type":"array","uniqueItems":true})", "uniqueItems", ""},
           {R"({"type":"object","patternProperties":{"^x":{}}})", "patternProperties", ""},
       }) {
    SchemaError e;
    auto g = grammar_for_schema(json::parse(c.schema), &e);
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(e.keyword, c.keyword) << c.schema;
    EXPECT_EQ(e.pointer, c.pointer) << c.schema;
    EXPECT_NE(e.message.find(c.keyword), std::string::npos) << e.message;
  }
  SchemaError e;
  EXPECT_FALSE(grammar_for_schema(json::parse(R"({"type":"strin"})"), &e).ok());
  EXPECT_FALSE(e.unsupported) << "a misspelt type is an invalid schema, not an unsupported one";
  EXPECT_FALSE(grammar_for_schema(json::parse(R"({"$ref":"#/$defs/missing"})"), &e).ok());
  EXPECT_EQ(e.keyword, "$ref");
}

TEST(TokenMask, TrieWalkEqualsBruteForceOnARealVocabulary) {
  const fs::path dir = memra::testing::fixture("tokenizer/tiny-bpe-1024");
  if (!fs::exists(dir)) GTEST_SKIP() << "fixtures absent";
  auto tok = memra::tokenizer::Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const int32_t eos = 1023;
  auto vocab = TokenVocabulary::build(**tok, 1024, {eos});
  auto grammar = std::make_shared<CompiledGrammar>(
      compile(R"({"type":"object","properties":{"title":{"type":"string","maxLength":12},"n":{"type":"integer"},"tags":{"type":"array","items":{"enum":["red","green"]}}},"required":["title","n","tags"]})"),
      vocab);
  // Walk random allowed paths; at every state compare the mask with brute force.
  std::mt19937 rng(7);
  int states = 0;
  for (int run = 0; run < 6; ++run) {
    auto c = grammar->constraint(grammar);
    for (int step = 0; step < 60; ++step) {
      const std::vector<uint64_t> mask = c->allowed();
      const MatchState& st = static_cast<GrammarConstraint&>(*c).state();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < 1024; ++id) {
        bool want = false;
        if (id == eos) want = st.complete();
        else if (!vocab->bytes(id).empty()) want = !st.advance(grammar->grammar(), vocab->bytes(id)).dead();
        const bool got = (mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u;
        ASSERT_EQ(got, want) << "token " << id << " '" << vocab->bytes(id) << "' at step " << step;
        if (got) allowed.push_back(id);
      }
      ++states;
      ASSERT_FALSE(allowed.empty()) << "dead end at step " << step;
      const int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(c->advance(pick));
      if (pick == eos) break;
    }
  }
  EXPECT_GT(states, 60);
}

TEST(TokenMask, RandomAllowedWalksSpellValidJson) {
  const fs::path dir = memra::testing::fixture("tokenizer/tiny-bpe-1024");
  if (!fs::exists(dir)) GTEST_SKIP() << "fixtures absent";
  auto tok = memra::tokenizer::Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(tok.ok());
  const int32_t eos = 1023;
  auto vocab = TokenVocabulary::build(**tok, 1024, {eos});
  auto grammar = std::make_shared<CompiledGrammar>(
      compile(R"({"type":"object","properties":{"ok":{"type":"boolean"},"k":{"enum":["a","b"]},"s":{"type":"string","maxLength":5}},"required":["ok","k","s"]})"),
      vocab);
  std::mt19937 rng(11);
  int finished = 0;
  for (int run = 0; run < 40; ++run) {
    auto c = grammar->constraint(grammar);
    std::string text;
    for (int step = 0; step < 200; ++step) {
      const auto& mask = c->allowed();
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < 1024; ++id)
        if ((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u) allowed.push_back(id);
      ASSERT_FALSE(allowed.empty());
      // Prefer ending once allowed, so runs finish.
      const bool can_end = std::find(allowed.begin(), allowed.end(), eos) != allowed.end();
      const int32_t pick = can_end ? eos : allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(c->advance(pick));
      if (pick == eos) break;
      text += vocab->bytes(pick);
    }
    const json doc = json::parse(text, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << text;
    EXPECT_TRUE(doc["ok"].is_boolean()) << text;
    EXPECT_TRUE(doc["k"] == "a" || doc["k"] == "b") << text;
    ++finished;
  }
  EXPECT_EQ(finished, 40);
}

// Hostile schemas (issue: requests that kill or exhaust the server). Each is refused or
// compiled in milliseconds: no recursion as deep as the schema's $ref chain, the grammar's
// size computed before anything is unrolled, self-reference refused as invalid.
namespace {

json ref_chain(int links) {
  // Written as text and parsed in linear time (ordered_json's operator[] scans its keys).
  std::string defs;
  for (int i = 0; i < links; ++i) defs += "\"a" + std::to_string(i) + "\":{\"$ref\":\"#/$defs/a" + std::to_string(i + 1) + "\"},";
  defs += "\"a" + std::to_string(links) + "\":{\"type\":\"integer\"}";
  memra::jsonio::Limits roomy;
  roomy.max_object_keys = std::size_t{1} << 20;
  auto schema = memra::jsonio::parse("{\"$defs\":{" + defs + "},\"$ref\":\"#/$defs/a0\"}", roomy);
  EXPECT_TRUE(schema.has_value());
  return schema ? std::move(*schema) : json();
}

json nested_arrays(int count, int levels, const char* bound = "minItems") {
  json s = {{"type", "integer"}};
  for (int i = 0; i < levels; ++i) s = {{"type", "array"}, {"items", s}, {bound, count}};
  return s;
}

}  // namespace

TEST(JsonGrammar, RefChainsResolveInALoopUpToTheLimit) {
  const Grammar g = compile(ref_chain(static_cast<int>(kMaxSchemaRefs) - 1).dump());
  EXPECT_TRUE(accepts(g, "42"));
  EXPECT_FALSE(accepts(g, "\"x\""));
  for (int links : {6000, 60000}) {
    const SchemaError e = refusal(ref_chain(links));
    EXPECT_EQ(e.keyword, "$ref");
    EXPECT_NE(e.message.find("more than 1000 different definitions"), std::string::npos) << e.message;
  }
}

TEST(JsonGrammar, GrammarSizeIsComputedBeforeUnrolling) {
  // 4096 x 4096 integers would unroll to hundreds of millions of elements: refused by name.
  for (int count : {1000, 4096}) {
    SchemaError e;
    const auto t = std::chrono::steady_clock::now();
    auto g = grammar_for_schema(nested_arrays(count, 2), &e);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(), 0.5);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(e.keyword, "minItems");
    EXPECT_EQ(e.pointer, "");  // the outer array: its count multiplies the inner one's size
    EXPECT_FALSE(e.unsupported);
    EXPECT_NE(e.message.find("too large"), std::string::npos) << e.message;
  }
  // Twelve levels of minItems 4: 4^12 copies, refused; three levels compile and match.
  EXPECT_EQ(refusal(nested_arrays(4, 12)).keyword, "minItems");
  EXPECT_EQ(refusal(nested_arrays(40, 4, "maxItems")).keyword, "maxItems");
  const Grammar g = compile(nested_arrays(2, 3).dump());
  EXPECT_TRUE(accepts(g, "[[[1,2],[3,4]],[[5,6],[7,8]]]"));
  EXPECT_FALSE(accepts(g, "[[[1,2],[3]],[[5,6],[7,8]]]"));
  // Strings too: 4096 characters inside 4096 array items.
  const json strings = {{"type", "array"}, {"minItems", 4096}, {"items", {{"type", "string"}, {"minLength", 4096}}}};
  EXPECT_EQ(refusal(strings).keyword, "minItems");
}

TEST(JsonGrammar, SelfReferenceIsRefusedAsInvalid) {
  for (const char* text : {
           R"({"$ref":"#"})",
           R"({"anyOf":[{"$ref":"#"}]})",
           R"({"allOf":[{"$ref":"#"}]})",
           R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
           // Recursion with no way out: every array must hold another one.
           R"({"type":"array","prefixItems":[{"$ref":"#"}],"items":false})",
           R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})",
       }) {
    SCOPED_TRACE(text);
    const SchemaError e = refusal(json::parse(text));
    EXPECT_EQ(e.keyword, "$ref");
    EXPECT_FALSE(e.unsupported);
  }
  // Recursion with a way out compiles, and a branch that can never end is pruned.
  const Grammar g = compile(R"({"anyOf":[{"$ref":"#"},{"type":"integer"}]})");
  EXPECT_TRUE(accepts(g, "7"));
  const Grammar opt = compile(
      R"({"type":"object","properties":{"v":{"type":"integer"},"loop":{"type":"array","prefixItems":[{"$ref":"#/properties/loop"}],"items":false}}})");
  EXPECT_TRUE(accepts(opt, R"({"v":1})"));
  EXPECT_TRUE(MatchState::start(opt).advance(opt, R"({"loop")").dead());  // never started
}

TEST(JsonGrammar, HugeArrayIndexInRefIsNotFound) {
  const SchemaError e = refusal(json::parse(R"({"$defs":{"a":[{"type":"integer"}]},"$ref":"#/$defs/a/99999999999999999999999"})"));
  EXPECT_EQ(e.keyword, "$ref");
}


TEST(JsonGrammar, WideChoicesAreRefusedPastWhatTheMatcherKeepsAlive) {
  json values = json::array(), branches = json::array();
  for (size_t i = 0; i <= kMaxAlternatives; ++i) {
    values.push_back("v" + std::to_string(i));
    branches.push_back({{"const", i}});
  }
  EXPECT_EQ(refusal({{"enum", values}}).keyword, "enum");
  EXPECT_EQ(refusal({{"anyOf", branches}}).keyword, "anyOf");
  values.erase(values.size() - 1);
  const Grammar g = compile(json{{"enum", values}}.dump());
  EXPECT_TRUE(accepts(g, "\"v4095\""));
  EXPECT_TRUE(accepts(g, "\"v0\""));
  EXPECT_FALSE(accepts(g, "\"v4096\""));
}
