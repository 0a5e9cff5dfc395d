// Per-tenant admission: keeps each tenant inside its limits from the key file
// (max_concurrent requests, max_kv_tokens = prompt + max_tokens summed over its
// running requests). A request over budget waits, in a bounded FIFO queue per
// tenant, up to the tenant's queue_timeout_ms; then it is refused (429).
// Tenants do not compete here (each has its own budget); the device's capacity
// is the scheduler's business, whose queue the tenant's priority orders.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "host/server/api_keys.hpp"

namespace memra::server {

class TenantAdmission {
 public:
  // `queue_limit`: waiting requests per tenant; one more is refused at once.
  explicit TenantAdmission(std::int64_t queue_limit) : queue_limit_(queue_limit) {}

  // Holds a tenant's share while alive; releasing wakes the tenant's waiters.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(TenantAdmission* owner, std::string tenant, std::int64_t kv_tokens)
        : owner_(owner), tenant_(std::move(tenant)), kv_tokens_(kv_tokens) {}
    Ticket(Ticket&& o) noexcept : owner_(o.owner_), tenant_(std::move(o.tenant_)), kv_tokens_(o.kv_tokens_) {
      o.owner_ = nullptr;
    }
    Ticket& operator=(Ticket&& o) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { release(); }
    void release();
    explicit operator bool() const { return owner_ != nullptr; }

   private:
    TenantAdmission* owner_ = nullptr;
    std::string tenant_;
    std::int64_t kv_tokens_ = 0;
  };

  enum class Outcome {
    admitted,
    too_large,    // the request alone is over max_kv_tokens: it can never run (400)
    queue_full,   // the tenant's wait queue is full (429 at once)
    timed_out,    // waited queue_timeout_ms without room (429)
    client_gone,  // the client disconnected while waiting
  };

  struct Result {
    Outcome outcome = Outcome::admitted;
    Ticket ticket;
    double waited_seconds = 0.0;
  };

  // `client_gone` is polled while waiting (may be empty).
  Result admit(const std::string& tenant, const TenantLimits& limits, std::int64_t kv_tokens,
               const std::function<bool()>& client_gone);

  struct TenantStats {
    std::string tenant;
    std::int64_t running = 0;
    std::int64_t kv_tokens = 0;
    std::int64_t waiting = 0;
  };
  std::vector<TenantStats> stats() const;

 private:
  struct Tenant {
    std::int64_t running = 0;
    std::int64_t kv_tokens = 0;
    std::deque<std::uint64_t> waiters;  // FIFO of waiting request ids
  };
  void release(const std::string& tenant, std::int64_t kv_tokens);
  static bool fits(const Tenant& t, const TenantLimits& limits, std::int64_t kv_tokens);

  std::int64_t queue_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Tenant> tenants_;
  std::uint64_t next_id_ = 0;
};

}  // namespace memra::server
