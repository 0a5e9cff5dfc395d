#include "host/server/api_keys.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/support/command.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::server {
namespace {

using memra::testing::coreutils_sha256;  // an independent oracle

TEST(ServerKeys, Sha256MatchesTheFips180Vector) {
  // FIPS 180-2, appendix B.1: SHA-256("abc").
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ServerKeys, Sha256MatchesCoreutils) {
  const std::string key = "sk-memra-test-0123456789";
  auto oracle = coreutils_sha256(key);
  if (!oracle) GTEST_SKIP() << "sha256sum not available";
  EXPECT_EQ(sha256_hex(key), *oracle);
}

TEST(ServerKeys, BearerTokenParsing) {
  EXPECT_EQ(bearer_token("Bearer abc"), "abc");
  EXPECT_EQ(bearer_token("bearer   abc  "), "abc");
  EXPECT_EQ(bearer_token("BEARER\tabc"), "abc");
  EXPECT_FALSE(bearer_token("Basic abc"));
  EXPECT_FALSE(bearer_token("Bearer"));
  EXPECT_FALSE(bearer_token("Bearer    "));
  EXPECT_FALSE(bearer_token("Bearerabc"));
  EXPECT_FALSE(bearer_token(""));
}

std::string key_file(const std::string& entries) { return R"({"keys":[)" + entries + "]}"; }

TEST(ServerKeys, ParsesEntriesAndLimits) {
  const std::string upper = sha256_hex("k2");
  std::string upper_hex = upper;
  for (char& c : upper_hex) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto store = KeyStore::parse(key_file(R"({"sha256":")" + sha256_hex("k1") + R"(","tenant":"acme",
      "limits":{"max_concurrent":8,"max_kv_tokens":65536,"queue_timeout_ms":1000,"priority":-2}},
      {"sha256":")" + upper_hex + R"(","tenant":"beta","disabled":true})"),
                               "test");
  ASSERT_TRUE(store) << store.error().message;
  ASSERT_EQ(store->keys().size(), 2u);
  EXPECT_EQ(store->enabled_count(), 1u);
  const auto& acme = store->keys()[0];
  EXPECT_EQ(acme.tenant, "acme");
  EXPECT_EQ(acme.limits.max_concurrent, 8);
  EXPECT_EQ(acme.limits.max_kv_tokens, 65536);
  EXPECT_EQ(acme.limits.queue_timeout_ms, 1000);
  EXPECT_EQ(acme.limits.priority, -2);
  const auto& beta = store->keys()[1];
  EXPECT_TRUE(beta.disabled);
  EXPECT_EQ(beta.limits.max_concurrent, 0);  // defaults: no limit
  EXPECT_EQ(beta.limits.queue_timeout_ms, 30000);

  auto ok = store->authenticate("Bearer k1");
  EXPECT_EQ(ok.outcome, AuthOutcome::ok);
  ASSERT_NE(ok.key, nullptr);
  EXPECT_EQ(ok.key->tenant, "acme");
  auto disabled = store->check_key("k2");  // upper-case hex in the file matches too
  EXPECT_EQ(disabled.outcome, AuthOutcome::disabled);
  ASSERT_NE(disabled.key, nullptr);
  EXPECT_EQ(disabled.key->tenant, "beta");
  EXPECT_EQ(store->check_key("k3").outcome, AuthOutcome::unknown);
  EXPECT_EQ(store->check_key("").outcome, AuthOutcome::unknown);
  EXPECT_EQ(store->authenticate("").outcome, AuthOutcome::missing);
  EXPECT_EQ(store->authenticate("Basic azE=").outcome, AuthOutcome::missing);
}

struct BadFile {
  std::string text;
  std::string expected;  // substring of the error message
};

TEST(ServerKeys, RejectsBadFilesNamingTheEntry) {
  const std::string good = R"({"sha256":")" + sha256_hex("a") + R"(","tenant":"acme"})";
  const std::vector<BadFile> cases = {
      {"not json", "not valid JSON"},
      {"[]", "top level must be an object"},
      {R"({"keys":{}})", "\"keys\" must be an array"},
      {R"({"keys":[]})", "\"keys\" is empty"},
      {R"({"keys":[],"extra":1})", "unknown top-level field \"extra\""},
      {key_file(good + R"(,{"sha256":"abc","tenant":"beta"})"), "keys[1] (tenant \"beta\"): \"sha256\" must be 64 hex"},
      {key_file(good + R"(,{"tenant":"beta"})"), "keys[1] (tenant \"beta\"): \"sha256\" is missing"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"("})"), "keys[0]: \"tenant\" is missing"},
      {key_file(good + "," + good), "keys[1] (tenant \"acme\") has the same sha256 as keys[0]"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"t","disabled":"no"})"), "\"disabled\" must be"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"t","sha265":"x"})"), "unknown field \"sha265\""},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"t","limits":{"max_concurent":1}})"),
       "unknown limit \"max_concurent\""},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"t","limits":{"max_concurrent":-1}})"),
       "limits.max_concurrent must be >= 0"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"t","limits":{"priority":1.5}})"),
       "limits.priority must be an integer"},
      {key_file("5"), "keys[0] must be an object"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"acme\nINFO forged line"})"),
       "\"tenant\" must not contain control characters"},
      {key_file(R"({"sha256":")" + sha256_hex("b") + R"(","tenant":"a\tb"})"), "must not contain control characters"},
  };
  for (const auto& c : cases) {
    auto store = KeyStore::parse(c.text, "keys.json");
    ASSERT_FALSE(store) << "accepted: " << c.text;
    EXPECT_NE(store.error().message.find(c.expected), std::string::npos)
        << "message: " << store.error().message << "\nexpected to contain: " << c.expected;
    EXPECT_NE(store.error().message.find("keys.json"), std::string::npos) << store.error().message;
  }
}

TEST(ServerKeys, LoadFileReportsAMissingFile) {
  auto store = KeyStore::load_file("/nonexistent/memra/keys.json");
  ASSERT_FALSE(store);
  EXPECT_EQ(store.error().code, ErrorCode::not_found);
  EXPECT_NE(store.error().message.find("/nonexistent/memra/keys.json"), std::string::npos);
}

TEST(ServerKeys, LoadFileReadsAFile) {
  const memra::testing::TempDir tmp("memra-keys");
  const auto path = tmp.write("keys.json", key_file(R"({"sha256":")" + sha256_hex("file-key") + R"(","tenant":"acme"})"));
  auto store = KeyStore::load_file(path);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ(store->check_key("file-key").outcome, AuthOutcome::ok);
}

}  // namespace
}  // namespace memra::server
