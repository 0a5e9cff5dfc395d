#include "repack/format/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "repack/format/sha256.hpp"

namespace memra::format {

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

std::filesystem::path first_load_lock_path(const std::filesystem::path& cache_dir, const std::filesystem::path& source) {
  const std::string text = std::filesystem::absolute(source).lexically_normal().string();
  return cache_dir / ".locks" / (sha256_hex(text.data(), text.size()).substr(0, 16) + ".lock");
}

Result<std::optional<FileLock>> FileLock::try_acquire(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return std::optional<FileLock>(FileLock(-1));  // nobody ever took it
  if (fd < 0)
    return make_error(ErrorCode::io, "cannot open the lock file " + file.string() + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return std::optional<FileLock>(FileLock(fd));
  const int e = errno;
  ::close(fd);
  if (e == EWOULDBLOCK) return std::optional<FileLock>();
  return make_error(ErrorCode::io, "cannot lock " + file.string() + ": " + std::strerror(e));
}

Result<FileLock> FileLock::acquire(const std::filesystem::path& file, const std::atomic<bool>* cancel,
                                   const std::function<void()>& on_wait) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error(ErrorCode::io, "cannot open the lock file " + file.string() + ": " + std::strerror(errno));
  bool told = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      const int e = errno;
      ::close(fd);
      return make_error(ErrorCode::io, "cannot lock " + file.string() + ": " + std::strerror(e));
    }
    if (!told && on_wait) on_wait();
    told = true;
    if (cancel && cancel->load()) {
      ::close(fd);
      return make_error(ErrorCode::io, "interrupted while waiting for the lock " + file.string());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return FileLock(fd);
}

}  // namespace memra::format
