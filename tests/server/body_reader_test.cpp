#include "host/server/body_reader.hpp"

#include <gtest/gtest.h>

#include <sstream>

namespace memra::server {
namespace {

TEST(ServerBody, ContentLengthWithinLimitIsReadExactly) {
  std::istringstream in("hello world and the next request");
  auto r = read_body(in, 11, false, 100);
  EXPECT_EQ(r.kind, BodyRead::Kind::ok);
  EXPECT_EQ(r.body, "hello world");
  EXPECT_TRUE(r.fully_consumed);
  // The bytes after the declared length are left for the next request.
  std::string rest;
  std::getline(in, rest);
  EXPECT_EQ(rest, " and the next request");
}

TEST(ServerBody, ContentLengthOverLimitIsRefusedWithoutReading) {
  std::istringstream in("0123456789");
  auto r = read_body(in, 10, false, 9);
  EXPECT_EQ(r.kind, BodyRead::Kind::too_large);
  EXPECT_FALSE(r.fully_consumed);
  EXPECT_EQ(in.tellg(), 0);  // not a byte read
  EXPECT_NE(r.detail.find("Content-Length 10"), std::string::npos);
}

TEST(ServerBody, ShortBodyIsAReadError) {
  std::istringstream in("abc");
  auto r = read_body(in, 10, false, 100);
  EXPECT_EQ(r.kind, BodyRead::Kind::read_error);
  EXPECT_NE(r.detail.find("3 of the 10"), std::string::npos);
}

TEST(ServerBody, ChunkedWithinLimit) {
  std::istringstream in(std::string(1000, 'x'));
  auto r = read_body(in, std::nullopt, true, 1000);
  EXPECT_EQ(r.kind, BodyRead::Kind::ok);
  EXPECT_EQ(r.body.size(), 1000u);
}

TEST(ServerBody, ChunkedOverLimitIsCutAndTheRestDiscarded) {
  std::istringstream in(std::string(200000, 'x'));
  auto r = read_body(in, std::nullopt, true, 1000);
  EXPECT_EQ(r.kind, BodyRead::Kind::too_large);
  EXPECT_TRUE(r.body.empty());
  EXPECT_TRUE(r.fully_consumed);  // 200 kB fits the 1 MiB discard budget
}

TEST(ServerBody, ChunkedFarOverLimitLeavesTheConnectionUnusable) {
  std::istringstream in(std::string(300000, 'x'));
  auto r = read_body(in, std::nullopt, true, 1000, /*discard_budget=*/100000);
  EXPECT_EQ(r.kind, BodyRead::Kind::too_large);
  EXPECT_FALSE(r.fully_consumed);
}

TEST(ServerBody, NoLengthAndNotChunkedIsEmpty) {
  std::istringstream in("ignored");
  auto r = read_body(in, std::nullopt, false, 1000);
  EXPECT_EQ(r.kind, BodyRead::Kind::ok);
  EXPECT_TRUE(r.body.empty());
}

}  // namespace
}  // namespace memra::server
