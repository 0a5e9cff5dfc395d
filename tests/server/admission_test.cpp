// Per-tenant admission: limits, FIFO waiting, timeouts, queue bound.
#include "host/server/admission.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace memra::server {
namespace {

using namespace std::chrono_literals;

TenantLimits limits(std::int64_t concurrent, std::int64_t kv, std::int64_t timeout_ms) {
  TenantLimits l;
  l.max_concurrent = concurrent;
  l.max_kv_tokens = kv;
  l.queue_timeout_ms = timeout_ms;
  return l;
}

TEST(ServerAdmission, ConcurrencyLimitWaitsThenTimesOut) {
  TenantAdmission a(8);
  const auto l = limits(1, 0, 200);
  auto first = a.admit("acme", l, 10, {});
  ASSERT_EQ(first.outcome, TenantAdmission::Outcome::admitted);
  const auto t0 = std::chrono::steady_clock::now();
  auto second = a.admit("acme", l, 10, {});
  EXPECT_EQ(second.outcome, TenantAdmission::Outcome::timed_out);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 190ms);
  EXPECT_GE(second.waited_seconds, 0.19);
  // Another tenant is not affected.
  EXPECT_EQ(a.admit("beta", l, 10, {}).outcome, TenantAdmission::Outcome::admitted);
  // Once the first is released, room is back.
  first.ticket.release();
  EXPECT_EQ(a.admit("acme", l, 10, {}).outcome, TenantAdmission::Outcome::admitted);
}

TEST(ServerAdmission, AWaiterGetsTheReleasedSlot) {
  TenantAdmission a(8);
  const auto l = limits(1, 0, 5000);
  auto first = a.admit("acme", l, 1, {});
  ASSERT_TRUE(first.ticket);
  auto waiter = std::async(std::launch::async, [&] { return a.admit("acme", l, 1, {}); });
  for (int i = 0; i < 200 && a.stats().front().waiting == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(a.stats().front().waiting, 1);
  EXPECT_EQ(waiter.wait_for(50ms), std::future_status::timeout);
  first.ticket.release();
  auto got = waiter.get();
  EXPECT_EQ(got.outcome, TenantAdmission::Outcome::admitted);
  EXPECT_EQ(a.stats().front().running, 1);
  got.ticket.release();
  EXPECT_EQ(a.stats().front().running, 0);
}

TEST(ServerAdmission, KvBudget) {
  TenantAdmission a(8);
  const auto l = limits(0, 100, 0);
  EXPECT_EQ(a.admit("acme", l, 101, {}).outcome, TenantAdmission::Outcome::too_large);
  auto big = a.admit("acme", l, 70, {});
  ASSERT_TRUE(big.ticket);
  EXPECT_EQ(a.admit("acme", l, 40, {}).outcome, TenantAdmission::Outcome::timed_out);  // no wait: timeout 0
  auto small = a.admit("acme", l, 30, {});
  EXPECT_EQ(small.outcome, TenantAdmission::Outcome::admitted);
  EXPECT_EQ(a.stats().front().kv_tokens, 100);
}

TEST(ServerAdmission, BoundedQueueAndDisconnects) {
  TenantAdmission a(1);
  const auto l = limits(1, 0, 3000);
  auto first = a.admit("acme", l, 1, {});
  std::atomic<bool> gone{false};
  auto waiter = std::async(std::launch::async, [&] { return a.admit("acme", l, 1, [&] { return gone.load(); }); });
  for (int i = 0; i < 200 && a.stats().front().waiting == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(a.admit("acme", l, 1, {}).outcome, TenantAdmission::Outcome::queue_full);
  gone = true;
  EXPECT_EQ(waiter.get().outcome, TenantAdmission::Outcome::client_gone);
  EXPECT_EQ(a.stats().front().waiting, 0);
}

TEST(ServerAdmission, NoLimitsAdmitsEverything) {
  TenantAdmission a(0);
  std::vector<TenantAdmission::Ticket> held;
  for (int i = 0; i < 100; ++i) {
    auto r = a.admit("t", TenantLimits{0, 0, 0, 0}, 1000, {});
    ASSERT_EQ(r.outcome, TenantAdmission::Outcome::admitted);
    held.push_back(std::move(r.ticket));
  }
  EXPECT_EQ(a.stats().front().running, 100);
}

}  // namespace
}  // namespace memra::server
