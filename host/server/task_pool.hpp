// A fixed set of threads taking tasks from a bounded FIFO queue. The HTTP front
// end runs two: the workers (completion requests, one task per request, a stream
// holding its thread until it ends) and the probe pool (/metrics), so probes
// never queue behind streams.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace memra::server {

class TaskPool {
 public:
  // `threads` threads named `name` ("memra-http" -> "memra-http-3"); at most
  // `max_queued` tasks wait for a free thread.
  TaskPool(std::string name, int threads, std::size_t max_queued);
  ~TaskPool();  // runs what is queued, then joins
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // False when the queue is full (the task is not taken).
  bool submit(std::function<void()> task);
  int threads() const { return static_cast<int>(threads_.size()); }
  int busy() const;              // threads running a task now
  std::size_t queued() const;

 private:
  void run();

  std::size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int busy_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace memra::server
