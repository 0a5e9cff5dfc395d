// An exclusive advisory lock (flock) on a file, held for the object's lifetime. Every
// process that shares a MEMRA_HOME takes the same lock before it makes a first-load
// repack of a source, so concurrent hosts make one repack and share it. The kernel
// drops the lock when its holder dies, so a killed process never leaves it taken.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>

#include "core/common/result.hpp"

namespace memra::format {

class FileLock {
 public:
  // Creates the file (and its directory) when needed and waits for the lock, calling
  // `on_wait` once if another process holds it. Fails when `cancel` is set while waiting.
  static Result<FileLock> acquire(const std::filesystem::path& file, const std::atomic<bool>* cancel = nullptr,
                                  const std::function<void()>& on_wait = {});
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace memra::format
