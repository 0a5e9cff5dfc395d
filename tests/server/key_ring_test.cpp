// Hot reload of the API key file: a changed valid file replaces the keys; a
// broken or missing one keeps the previous keys.
#include "host/server/key_ring.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "tests/support/temp_dir.hpp"

namespace memra::server {
namespace {

using memra::testing::TempDir;

std::string keys_json(const std::string& key, const std::string& tenant) {
  return R"({"keys":[{"sha256":")" + sha256_hex(key) + R"(","tenant":")" + tenant + R"("}]})";
}

TEST(ServerKeyRing, ReloadsAValidFileAndKeepsKeysOverABrokenOne) {
  TempDir dir;
  const auto file = dir.write("keys.json", keys_json("k1", "acme"));
  auto store = KeyStore::load_file(file);
  ASSERT_TRUE(store);
  KeyRing ring(std::move(*store), file, Poco::Logger::get("test"));
  EXPECT_FALSE(ring.reload_if_changed());  // unchanged
  EXPECT_EQ(ring.current()->check_key("k1").outcome, AuthOutcome::ok);

  dir.write("keys.json", keys_json("k2", "beta") + " ");  // new key, different size
  EXPECT_TRUE(ring.reload_if_changed());
  EXPECT_EQ(ring.current()->check_key("k1").outcome, AuthOutcome::unknown);
  auto k2 = ring.current()->check_key("k2");
  ASSERT_EQ(k2.outcome, AuthOutcome::ok);
  EXPECT_EQ(k2.key->tenant, "beta");

  const auto held = ring.current();  // a request's snapshot survives reloads
  dir.write("keys.json", R"({"keys":[{"sha256":"nothex","tenant":"x"}]})");
  EXPECT_FALSE(ring.reload_if_changed());
  EXPECT_EQ(ring.current()->check_key("k2").outcome, AuthOutcome::ok);
  std::filesystem::remove(file);
  EXPECT_FALSE(ring.reload_if_changed());
  EXPECT_EQ(ring.current()->check_key("k2").outcome, AuthOutcome::ok);
  EXPECT_EQ(held->check_key("k2").outcome, AuthOutcome::ok);

  dir.write("keys.json", keys_json("k3", "gamma"));
  ring.watch(20);  // the watcher thread picks it up by itself
  for (int i = 0; i < 200 && ring.current()->check_key("k3").outcome != AuthOutcome::ok; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ring.current()->check_key("k3").outcome, AuthOutcome::ok);
  EXPECT_EQ(ring.reloads(), 2u);
}

}  // namespace
}  // namespace memra::server
