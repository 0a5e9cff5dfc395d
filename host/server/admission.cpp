#include "host/server/admission.hpp"

#include <algorithm>

namespace memra::server {

TenantAdmission::Ticket& TenantAdmission::Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    owner_ = o.owner_;
    tenant_ = std::move(o.tenant_);
    kv_tokens_ = o.kv_tokens_;
    o.owner_ = nullptr;
  }
  return *this;
}

void TenantAdmission::Ticket::release() {
  if (owner_ != nullptr) owner_->release(tenant_, kv_tokens_);
  owner_ = nullptr;
}

bool TenantAdmission::fits(const Tenant& t, const TenantLimits& limits, std::int64_t kv_tokens) {
  if (limits.max_concurrent > 0 && t.running + 1 > limits.max_concurrent) return false;
  if (limits.max_kv_tokens > 0 && t.kv_tokens + kv_tokens > limits.max_kv_tokens) return false;
  return true;
}

TenantAdmission::Result TenantAdmission::admit(const std::string& tenant, const TenantLimits& limits,
                                               std::int64_t kv_tokens, const std::function<bool()>& client_gone) {
  Result result;
  if (limits.max_kv_tokens > 0 && kv_tokens > limits.max_kv_tokens) {
    result.outcome = Outcome::too_large;
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  Tenant& t = tenants_[tenant];
  // FIFO within the tenant: a request may go ahead only when nobody waits before it.
  if (t.waiters.empty() && fits(t, limits, kv_tokens)) {
    ++t.running;
    t.kv_tokens += kv_tokens;
    result.ticket = Ticket(this, tenant, kv_tokens);
    return result;
  }
  if (limits.queue_timeout_ms <= 0 || static_cast<std::int64_t>(t.waiters.size()) >= queue_limit_) {
    result.outcome = limits.queue_timeout_ms <= 0 ? Outcome::timed_out : Outcome::queue_full;
    return result;
  }
  const std::uint64_t id = ++next_id_;
  t.waiters.push_back(id);
  const auto deadline = start + std::chrono::milliseconds(limits.queue_timeout_ms);
  while (true) {
    Tenant& now = tenants_[tenant];
    if (now.waiters.front() == id && fits(now, limits, kv_tokens)) {
      now.waiters.pop_front();
      ++now.running;
      now.kv_tokens += kv_tokens;
      result.ticket = Ticket(this, tenant, kv_tokens);
      break;
    }
    const auto clock = std::chrono::steady_clock::now();
    const bool gone = client_gone && client_gone();
    if (clock >= deadline || gone) {
      result.outcome = gone ? Outcome::client_gone : Outcome::timed_out;
      std::erase(now.waiters, id);
      break;
    }
    // Wake on releases; poll the client every 100 ms.
    cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(deadline - clock, std::chrono::milliseconds(100)));
  }
  lock.unlock();
  cv_.notify_all();  // the queue head may have changed
  result.waited_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void TenantAdmission::release(const std::string& tenant, std::int64_t kv_tokens) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    Tenant& t = tenants_[tenant];
    --t.running;
    t.kv_tokens -= kv_tokens;
  }
  cv_.notify_all();
}

std::vector<TenantAdmission::TenantStats> TenantAdmission::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TenantStats> out;
  for (const auto& [name, t] : tenants_) {
    out.push_back({name, t.running, t.kv_tokens, static_cast<std::int64_t>(t.waiters.size())});
  }
  return out;
}

}  // namespace memra::server
