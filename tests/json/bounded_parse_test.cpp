// jsonio::parse against nlohmann's own parse (the oracle for every document within the
// limits) and at each limit: depth, keys per object, items per array, memory.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "host/json/bounded_parse.hpp"

namespace memra::jsonio {
namespace {

using ojson = nlohmann::ordered_json;

std::string nested(std::size_t depth, const char* open = "[", const char* close = "]") {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += open;
  s += "1";
  for (std::size_t i = 0; i < depth; ++i) s += close;
  return s;
}

std::string object_with_keys(std::size_t n) {
  std::string s = "{";
  for (std::size_t i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return s + "}";
}

double seconds(const std::function<void()>& f) {
  const auto t = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(BoundedParse, SameDocumentAsNlohmann) {
  for (const char* text : {
           R"({"a":1,"b":[true,false,null,1.5,-3,18446744073709551615],"c":{"d":"e\u00e9\n"}})",
           R"([])", R"({})", R"("text")", R"(12)", R"([[],{},[{}]])",
           R"({"z":1,"a":2,"m":{"y":[1,2,{"x":null}]}})",
           R"({"dup":1,"other":2,"dup":3})",  // the last value wins, in the first one's place
       }) {
    SCOPED_TRACE(text);
    auto got = parse(text);
    ASSERT_TRUE(got.has_value());
    const ojson want = ojson::parse(text);
    EXPECT_EQ(*got, want);
    EXPECT_EQ(got->dump(), want.dump());  // key order too
  }
}

TEST(BoundedParse, DuplicateKeysInLargeObjectsLastWins) {
  std::string text = object_with_keys(100);
  text.pop_back();
  text += ",\"k7\":\"late\",\"k99\":\"later\"}";
  auto got = parse(text);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, ojson::parse(text));
  EXPECT_EQ(got->size(), 100u);
  EXPECT_EQ((*got)["k7"], "late");
  EXPECT_EQ(got->begin().key(), "k0");
}

TEST(BoundedParse, SyntaxErrorsAsNlohmannWordsThem) {
  for (const char* text : {"", "{", "{\"a\":}", "[1,]", "{\"a\":1,}", "nul", "\"\xff\xfe\""}) {
    SCOPED_TRACE(text);
    ParseError e;
    EXPECT_FALSE(parse(text, kRequestLimits, &e).has_value());
    EXPECT_EQ(e.kind, ParseError::Kind::syntax);
    EXPECT_NE(e.message.find("parse error"), std::string::npos) << e.message;
  }
}

TEST(BoundedParse, DepthLimitNamesThePlace) {
  EXPECT_TRUE(parse(nested(64)).has_value());
  ParseError e;
  EXPECT_FALSE(parse(nested(65), kRequestLimits, &e).has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::depth);
  EXPECT_EQ(e.message, "nesting deeper than 64 levels");
  // Far past the limit, and inside an object: the parse stops at the 65th bracket.
  const std::string deep = "{\"messages\":[{\"content\":" + nested(100000, "{\"a\":", "}") + "}]}";
  EXPECT_FALSE(parse(deep, kRequestLimits, &e).has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::depth);
  EXPECT_EQ(e.path.rfind("messages[0].content.a.a", 0), 0u) << e.path;
  EXPECT_EQ(top_field(e.path), "messages");
  // Brackets inside strings are text.
  EXPECT_TRUE(parse("{\"a\":\"" + std::string(100000, '[') + "\"}").has_value());
}

TEST(BoundedParse, KeyAndItemLimits) {
  Limits small;
  small.max_object_keys = 10;
  small.max_array_items = 5;
  EXPECT_TRUE(parse(object_with_keys(10), small).has_value());
  ParseError e;
  EXPECT_FALSE(parse("{\"metadata\":" + object_with_keys(11) + "}", small, &e).has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::object_keys);
  EXPECT_EQ(e.path, "metadata");
  EXPECT_TRUE(parse("[1,2,3,4,5]", small).has_value());
  EXPECT_FALSE(parse("{\"prompt\":[1,2,3,4,5,6]}", small, &e).has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::array_items);
  EXPECT_EQ(top_field(e.path), "prompt");
}

TEST(BoundedParse, MemoryBudget) {
  Limits small;
  small.max_memory_bytes = 1 << 20;
  std::string arrays = "[";
  for (int i = 0; i < 100000; ++i) arrays += i ? ",[]" : "[]";
  arrays += "]";
  ParseError e;
  EXPECT_FALSE(parse(arrays, small, &e).has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::memory);
  EXPECT_TRUE(parse(arrays).has_value());  // 100,000 empty arrays fit the default budget
}

// Linear time: nlohmann's ordered_json scans every key on each insert; 10,000 keys (the
// limit) and 400,000 (refused) both take milliseconds here.
TEST(BoundedParse, ManyKeysInLinearTime) {
  const std::string at_limit = object_with_keys(10000);
  const std::string far_past = "{\"metadata\":" + object_with_keys(400000) + "}";
  std::optional<ojson> got;
  EXPECT_LT(seconds([&] { got = parse(at_limit); }), 0.5);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), 10000u);
  EXPECT_EQ((*got)["k9999"], 9999);
  ParseError e;
  EXPECT_LT(seconds([&] { got = parse(far_past, kRequestLimits, &e); }), 0.5);
  EXPECT_FALSE(got.has_value());
  EXPECT_EQ(e.kind, ParseError::Kind::object_keys);
  EXPECT_EQ(e.path, "metadata");
}

}  // namespace
}  // namespace memra::jsonio
