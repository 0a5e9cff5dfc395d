// Structured output after reasoning (#46 item 4): the grammar of a constrained answer applies
// only once the model's thinking has closed (host/structured/thinking_grammar.hpp), and what
// the mask lets through splits (ReasoningSplitter) into the thinking and valid JSON. Scripted
// token sequences of the random test model's vocabulary drive the constraint token by token.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "host/server/reasoning_parser.hpp"
#include "host/structured/grammar_constraint.hpp"
#include "host/structured/json_grammar.hpp"
#include "host/structured/thinking_grammar.hpp"
#include "host/tokenizer/tokenizer.hpp"

namespace memra::server {
namespace {

using namespace memra::structured;
using json = nlohmann::json;

constexpr int32_t kEos = 1023;
const ThinkingMarkers kMarkers{"<think>", "</think>"};
const char* kSchema =
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},"ok":{"type":"boolean"},"unit":{"enum":["c","f"]}},"required":["city","ok","unit"],"additionalProperties":false})";

struct Fixture {
  std::shared_ptr<const tokenizer::Tokenizer> tok;
  std::shared_ptr<const TokenVocabulary> vocab;
};

const Fixture* fixture() {
  static Fixture f = [] {
    Fixture x;
    auto t = tokenizer::Tokenizer::from_hf_dir(std::string(MEMRA_SOURCE_ROOT) + "/tests/models/tiny-random");
    if (!t.ok()) return x;
    x.tok = std::move(*t);
    x.vocab = TokenVocabulary::build(*x.tok, 1024, {kEos});
    return x;
  }();
  return f.vocab ? &f : nullptr;
}

// The grammars output_constraint() makes for a json_schema answer of a thinking model.
struct Grammars {
  std::shared_ptr<const CompiledGrammar> main, forced;
};
Grammars grammars(bool starts_inside, bool may_open) {
  GrammarBuilder b;
  JsonGrammarCompiler compiler(b);
  uint32_t answer = 0;
  EXPECT_FALSE(compiler.compile(nlohmann::ordered_json::parse(kSchema), answer).has_value());
  const uint32_t forced = b.add(close_then(kMarkers, ref(answer)));
  const uint32_t root = b.add(thinking_then(b, kMarkers, starts_inside, may_open, ref(answer)));
  GrammarBuilder copy = b;
  Grammars g;
  g.forced = std::make_shared<const CompiledGrammar>(std::move(copy).build(forced), fixture()->vocab);
  g.main = std::make_shared<const CompiledGrammar>(std::move(b).build(root), fixture()->vocab);
  return g;
}

bool allows(engine::TokenConstraint& c, int32_t id) { return (c.allowed()[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u; }

// Feeds `text`'s tokens one by one; the number fed before one was refused (all: the size).
size_t feed(engine::TokenConstraint& c, const std::string& text, std::vector<int32_t>* ids_out = nullptr) {
  const auto ids = fixture()->tok->encode(text, false);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!allows(c, ids[i])) return i;
    EXPECT_TRUE(c.advance(ids[i]));
    if (ids_out) ids_out->push_back(ids[i]);
  }
  return ids.size();
}

ReasoningSplitter::Split split(const std::string& text, bool starts_inside) {
  ReasoningSplitter s({"<think>", "</think>"}, starts_inside);
  auto a = s.push(text);
  auto b = s.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

TEST(ThinkingConstraint, TheGrammarStartsOnlyAfterTheThinkingCloses) {
  if (!fixture()) GTEST_SKIP() << "tests/models/tiny-random is missing";
  const Grammars g = grammars(/*starts_inside=*/true, false);
  const std::string thinking = "Paris? {\"city\": 1} is not it </thi <think> hmm <</think>";
  const std::string answer = "{\"city\":\"Paris\",\"ok\":true,\"unit\":\"c\"}";
  auto c = g.main->constraint(g.main);
  // Inside the thinking everything goes (JSON too, partial markers too) but the end of text.
  const auto ids = fixture()->tok->encode(thinking, false);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_FALSE(allows(*c, kEos)) << "the answer may not end inside the thinking (token " << i << ")";
    ASSERT_TRUE(allows(*c, ids[i])) << "thinking token " << i;
    ASSERT_TRUE(c->advance(ids[i]));
  }
  // After the close marker: whitespace, then only the schema.
  ASSERT_EQ(feed(*c, "\n\n" + answer), fixture()->tok->encode("\n\n" + answer, false).size());
  EXPECT_TRUE(allows(*c, kEos));
  const auto s = split(thinking + "\n\n" + answer, true);
  EXPECT_EQ(s.reasoning, "Paris? {\"city\": 1} is not it </thi <think> hmm <");
  EXPECT_EQ(json::parse(s.content), json::parse(answer));

  // JSON without the close marker stays thinking: the end never comes.
  auto d = g.main->constraint(g.main);
  feed(*d, "ok\n" + answer);
  EXPECT_FALSE(allows(*d, kEos));
  // After the close marker, text that is not the schema's is refused.
  auto e = g.main->constraint(g.main);
  const std::string bad = "x</think>\nnot json";
  EXPECT_LT(feed(*e, bad), fixture()->tok->encode(bad, false).size());
  // So is endless padding after the marker.
  auto f = g.main->constraint(g.main);
  const std::string pad = "x</think>" + std::string(20, '\n') + answer;
  EXPECT_LT(feed(*f, pad), fixture()->tok->encode(pad, false).size());
}

TEST(ThinkingConstraint, AModelThatMayThinkEitherAnswersAtOnceOrThinksFirst) {
  if (!fixture()) GTEST_SKIP() << "tests/models/tiny-random is missing";
  const Grammars g = grammars(false, /*may_open=*/true);
  const std::string answer = "{\"city\":\"Oslo\",\"ok\":false,\"unit\":\"f\"}";
  for (const std::string text : {answer, "<think>\nweather?\n</think>\n\n" + answer, "\n<think>a</think>" + answer}) {
    auto c = g.main->constraint(g.main);
    ASSERT_EQ(feed(*c, text), fixture()->tok->encode(text, false).size()) << text;
    EXPECT_TRUE(allows(*c, kEos)) << text;
    EXPECT_EQ(json::parse(split(text, false).content), json::parse(answer)) << text;
  }
  auto c = g.main->constraint(g.main);
  EXPECT_LT(feed(*c, "<thinking>"), fixture()->tok->encode("<thinking>", false).size());
  // The thinking closed by the prompt (enable_thinking false): the schema at once.
  const Grammars closed = grammars(false, false);
  auto d = closed.main->constraint(closed.main);
  EXPECT_LT(feed(*d, "<think>a</think>" + answer), fixture()->tok->encode("<think>a</think>" + answer, false).size());
}

// A model whose sampling picks among the allowed tokens at random (what a random-weight model
// under the mask does), preferring the end of text once allowed.
std::string random_walk(engine::TokenConstraint& c, std::mt19937& rng, size_t steps, std::vector<int32_t>* ids) {
  std::string text;
  for (size_t step = 0; step < steps; ++step) {
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < 1024; ++id)
      if (allows(c, id)) allowed.push_back(id);
    if (allowed.empty()) return text + "<dead end>";
    const bool can_end = allows(c, kEos);
    const int32_t pick = can_end ? kEos : allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    EXPECT_TRUE(c.advance(pick));
    if (pick == kEos) return text;
    if (ids) ids->push_back(pick);
    text += fixture()->vocab->bytes(pick);
  }
  return text + "<no end>";
}

TEST(ThinkingConstraint, ABudgetForcesTheCloseMarkerAndTheAnswerFollows) {
  if (!fixture()) GTEST_SKIP() << "tests/models/tiny-random is missing";
  for (const bool inside : {true, false}) {
    const Grammars g = grammars(inside, !inside);
    for (unsigned seed = 1; seed <= 6; ++seed) {
      std::mt19937 rng(seed);
      ThinkingBudgetConstraint c(g.main, g.forced, kMarkers, inside, 5);
      std::string prefix;
      if (!inside) ASSERT_EQ(feed(c, "<think>"), fixture()->tok->encode("<think>", false).size());
      if (!inside) prefix = "<think>";
      std::vector<int32_t> ids;
      const std::string text = prefix + random_walk(c, rng, 400, &ids);
      EXPECT_TRUE(c.forced()) << text;
      EXPECT_EQ(c.thinking_tokens(), 5) << text;
      std::string thought;
      for (size_t i = 0; i < 5; ++i) thought += fixture()->vocab->bytes(ids[i]);
      std::string rest;
      for (size_t i = 5; i < ids.size(); ++i) rest += fixture()->vocab->bytes(ids[i]);
      EXPECT_EQ(rest.rfind("</think>", 0), 0u) << "the sixth token starts the close marker: " << text;
      const auto s = split(text, inside);
      EXPECT_FALSE(s.reasoning.empty()) << text;
      const json doc = json::parse(s.content, nullptr, false);
      ASSERT_FALSE(doc.is_discarded()) << "seed " << seed << ": " << text;
      EXPECT_TRUE(doc["ok"].is_boolean() && doc["city"].is_string() && (doc["unit"] == "c" || doc["unit"] == "f")) << text;
    }
  }
  // A clone taken at the budget continues exactly as the original.
  const Grammars g = grammars(true, false);
  ThinkingBudgetConstraint c(g.main, g.forced, kMarkers, true, 2);
  feed(c, "ab");
  auto copy = c.clone();
  EXPECT_EQ(copy->allowed(), c.allowed());
  // Budget 0 on an opened prompt: the close marker at once.
  ThinkingBudgetConstraint zero(g.main, g.forced, kMarkers, true, 0);
  for (int32_t id = 0; id < 1024; ++id)
    if (allows(zero, id)) EXPECT_EQ(std::string("</think>").rfind(fixture()->vocab->bytes(id), 0), 0u) << id;
}

}  // namespace
}  // namespace memra::server
