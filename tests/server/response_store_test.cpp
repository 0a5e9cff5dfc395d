// The /v1/responses store: per tenant, capped in entries and bytes, least recently used out first.
#include <gtest/gtest.h>

#include "host/server/response_store.hpp"

namespace memra::server {
namespace {

TEST(ServerResponseStore, OneTenantNeverSeesAnothersResponses) {
  ResponseStore store(8, 1024);
  store.put("acme", "resp_1", "[1]");
  EXPECT_EQ(store.get("acme", "resp_1"), "[1]");
  EXPECT_EQ(store.get("umbrella", "resp_1"), std::nullopt);
  store.put("umbrella", "resp_1", "[2]");  // the same id in another tenant is another entry
  EXPECT_EQ(store.get("acme", "resp_1"), "[1]");
  EXPECT_EQ(store.get("umbrella", "resp_1"), "[2]");
  EXPECT_EQ(store.get("acme", "resp_2"), std::nullopt);
}

TEST(ServerResponseStore, TheLeastRecentlyUsedGoesFirstWhenATenantIsFull) {
  ResponseStore store(3, 1 << 20);
  store.put("t", "a", "A");
  store.put("t", "b", "B");
  store.put("t", "c", "C");
  EXPECT_TRUE(store.get("t", "a"));  // a is now the most recently used
  store.put("t", "d", "D");          // b goes
  EXPECT_EQ(store.entries("t"), 3u);
  EXPECT_FALSE(store.get("t", "b"));
  EXPECT_TRUE(store.get("t", "a") && store.get("t", "c") && store.get("t", "d"));
  // Another tenant's entries do not count against this one's.
  for (int i = 0; i < 10; ++i) store.put("other", std::to_string(i), "x");
  EXPECT_EQ(store.entries("t"), 3u);
  EXPECT_EQ(store.entries("other"), 3u);
}

TEST(ServerResponseStore, TheByteCapEvictsAndAnOversizedConversationIsNotKept) {
  ResponseStore store(100, 10);
  store.put("t", "a", "1234");
  store.put("t", "b", "5678");
  EXPECT_EQ(store.bytes("t"), 8u);
  store.put("t", "c", "90ab");  // 12 bytes: a goes
  EXPECT_EQ(store.bytes("t"), 8u);
  EXPECT_FALSE(store.get("t", "a"));
  store.put("t", "big", std::string(11, 'x'));
  EXPECT_FALSE(store.get("t", "big"));
  EXPECT_EQ(store.bytes("t"), 8u);
  store.put("t", "b", "12");  // replacing an entry recounts its bytes
  EXPECT_EQ(store.bytes("t"), 6u);
  EXPECT_EQ(store.get("t", "b"), "12");
}

TEST(ServerResponseStore, AStoredResponseIsRetrievedAndDeletedOnlyByItsTenant) {
  ResponseStore store(8, 1024);
  store.put("acme", "resp_1", "[1]", R"({"id":"resp_1"})");
  EXPECT_EQ(store.response("acme", "resp_1"), R"({"id":"resp_1"})");
  EXPECT_EQ(store.bytes("acme"), 3u + 15u);  // the conversation and the Response object both count
  EXPECT_EQ(store.response("umbrella", "resp_1"), std::nullopt);
  EXPECT_FALSE(store.erase("umbrella", "resp_1"));  // another tenant cannot delete it
  EXPECT_TRUE(store.erase("acme", "resp_1"));
  EXPECT_FALSE(store.erase("acme", "resp_1"));
  EXPECT_EQ(store.get("acme", "resp_1"), std::nullopt);  // previous_response_id no longer finds it
  EXPECT_EQ(store.bytes("acme"), 0u);
  EXPECT_EQ(store.entries("acme"), 0u);
}

}  // namespace
}  // namespace memra::server
