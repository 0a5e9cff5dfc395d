// The API keys in force, hot-reloaded: a watcher thread polls the key file's
// modification time (and size) and swaps in the new keys when the file changed
// and is valid. A broken new file keeps the previous keys and logs why. Each
// request takes a snapshot (shared_ptr), so a reload never pulls keys from
// under a request in flight.
#pragma once

#include <Poco/Logger.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "host/server/api_keys.hpp"

namespace memra::server {

class KeyRing {
 public:
  // Fixed keys, no file (tests).
  explicit KeyRing(KeyStore keys);
  // Keys from `file`, already loaded as `keys`; call watch() to start reloading.
  KeyRing(KeyStore keys, std::filesystem::path file, Poco::Logger& log);
  ~KeyRing();
  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;

  std::shared_ptr<const KeyStore> current() const;
  // Starts the watcher thread: checks the file every `period_ms`.
  void watch(int period_ms);
  // Checks the file once now; true when new keys were installed.
  bool reload_if_changed();
  std::uint64_t reloads() const { return reloads_.load(); }

 private:
  struct Stamp {
    std::filesystem::file_time_type mtime{};
    std::uintmax_t size = 0;
    bool exists = false;
    bool operator==(const Stamp&) const = default;
  };
  Stamp stamp() const;

  mutable std::mutex mu_;
  std::shared_ptr<const KeyStore> keys_;
  std::filesystem::path file_;
  Poco::Logger* log_ = nullptr;
  Stamp seen_;
  std::atomic<std::uint64_t> reloads_{0};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace memra::server
