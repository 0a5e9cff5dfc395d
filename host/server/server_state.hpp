// Shared run state: whether the server drains, and how many admitted requests
// are still running. A request is admitted (counted) before it checks the drain
// flag, and the drain sets the flag before it waits for the count to reach 0,
// so no request can slip in unseen (both use sequentially consistent atomics).
#pragma once

#include <atomic>
#include <cstdint>

namespace memra::server {

class ServerState {
 public:
  // RAII token for an admitted request; empty when the server is draining.
  class Admission {
   public:
    Admission() = default;
    explicit Admission(ServerState* state) : state_(state) {}
    Admission(Admission&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
    Admission& operator=(Admission&&) = delete;
    Admission(const Admission&) = delete;
    ~Admission();
    explicit operator bool() const { return state_ != nullptr; }

   private:
    ServerState* state_ = nullptr;
  };

  Admission try_admit();
  void begin_drain();
  bool draining() const { return draining_.load(); }
  int admitted() const { return admitted_.load(); }
  // Monotonic request ids for logs and the x-request-id header.
  std::uint64_t next_request_id() { return ++request_ids_; }

 private:
  std::atomic<int> admitted_{0};
  std::atomic<bool> draining_{false};
  std::atomic<std::uint64_t> request_ids_{0};
};

}  // namespace memra::server
