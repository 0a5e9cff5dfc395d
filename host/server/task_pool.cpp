#include "host/server/task_pool.hpp"

#include <pthread.h>

#include <algorithm>

namespace memra::server {

TaskPool::TaskPool(std::string name, int threads, std::size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] { run(); });
    // Thread names show up in top/gdb; Linux allows 15 characters.
    const std::string n = (name + "-" + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), n.c_str());
  }
}

TaskPool::~TaskPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool TaskPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queued_ + static_cast<std::size_t>(static_cast<int>(threads_.size()) - busy_)) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

int TaskPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

std::size_t TaskPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void TaskPool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    task();
    task = nullptr;  // release what it captured before taking the lock
    lock.lock();
    --busy_;
  }
}

}  // namespace memra::server
