// An exclusive advisory lock (flock) on a file, held for the object's lifetime. Every
// process that shares a MEMRA_HOME takes the same lock before it makes a first-load
// repack of a source, so concurrent hosts make one repack and share it. The kernel
// drops the lock when its holder dies, so a killed process never leaves it taken.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include "core/common/result.hpp"

namespace memra::format {

// The lock that serialises first-load repacks of `source` in a repack cache (and that
// memra-registry prune takes before it removes an unrecorded repack of that source).
std::filesystem::path first_load_lock_path(const std::filesystem::path& cache_dir, const std::filesystem::path& source);

class FileLock {
 public:
  // Creates the file (and its directory) when needed and waits for the lock, calling
  // `on_wait` once if another process holds it. Fails when `cancel` is set while waiting.
  static Result<FileLock> acquire(const std::filesystem::path& file, const std::atomic<bool>* cancel = nullptr,
                                  const std::function<void()>& on_wait = {});
  // Without waiting: nullopt when another holder has it. A lock file that does not exist
  // is free (and is not created).
  static Result<std::optional<FileLock>> try_acquire(const std::filesystem::path& file);
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
