#include "host/server/key_ring.hpp"

namespace memra::server {

KeyRing::KeyRing(KeyStore keys) : keys_(std::make_shared<const KeyStore>(std::move(keys))) {}

KeyRing::KeyRing(KeyStore keys, std::filesystem::path file, Poco::Logger& log)
    : keys_(std::make_shared<const KeyStore>(std::move(keys))), file_(std::move(file)), log_(&log) {
  seen_ = stamp();
}

KeyRing::~KeyRing() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::shared_ptr<const KeyStore> KeyRing::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

KeyRing::Stamp KeyRing::stamp() const {
  Stamp s;
  std::error_code ec;
  s.mtime = std::filesystem::last_write_time(file_, ec);
  if (ec) return s;
  s.size = std::filesystem::file_size(file_, ec);
  s.exists = !ec;
  return s;
}

bool KeyRing::reload_if_changed() {
  if (file_.empty()) return false;
  const Stamp now = stamp();
  if (now == seen_) return false;
  seen_ = now;  // a broken file is reported once, not every second
  if (!now.exists) {
    log_->error("API key file %s is gone; keeping the %s key(s) loaded before. Restore the file to change keys.",
                file_.string(), std::to_string(current()->keys().size()));
    return false;
  }
  auto loaded = KeyStore::load_file(file_);
  if (!loaded) {
    log_->error("API key file changed but cannot be used, so the previous keys stay in force: %s",
                loaded.error().message);
    return false;
  }
  const auto count = loaded->keys().size();
  const auto enabled = loaded->enabled_count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    keys_ = std::make_shared<const KeyStore>(std::move(*loaded));
  }
  ++reloads_;
  log_->information("auth: reloaded %s: %s key(s), %s enabled", file_.string(), std::to_string(count),
                    std::to_string(enabled));
  return true;
}

void KeyRing::watch(int period_ms) {
  if (file_.empty() || watcher_.joinable()) return;
  watcher_ = std::thread([this, period_ms] {
    std::unique_lock<std::mutex> lock(stop_mu_);
    while (!stop_cv_.wait_for(lock, std::chrono::milliseconds(period_ms), [this] { return stop_; })) {
      lock.unlock();
      reload_if_changed();
      lock.lock();
    }
  });
}

}  // namespace memra::server
