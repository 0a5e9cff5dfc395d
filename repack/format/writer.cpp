#include "repack/format/writer.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <random>

#include "repack/format/crc32c.hpp"
#include "repack/format/sha256.hpp"

namespace memra::format {
namespace {

namespace fs = std::filesystem;

Error io_error(const std::string& what, const fs::path& p, int err) {
  return make_error(ErrorCode::io, what + " " + p.string() + ": " + std::strerror(err) +
                                       (err == ENOSPC ? " (free some disk space and run again)" : ""));
}

Status write_all(int fd, const uint8_t* p, uint64_t n, uint64_t offset, const fs::path& path) {
  while (n > 0) {
    const size_t k = n < (uint64_t{1} << 30) ? static_cast<size_t>(n) : (size_t{1} << 30);
    const ssize_t w = ::pwrite(fd, p, k, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write", path, errno);
    }
    p += w;
    n -= static_cast<uint64_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return {};
}

Status fsync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", p, errno);
  const int r = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (r != 0) return io_error("cannot fsync", p, e);
  return {};
}

std::string temp_prefix(const fs::path& dst) { return "." + dst.filename().string() + ".tmp-"; }
constexpr const char* kWriterLock = ".writer.lock";

// ".<name>.tmp-<pid>-<random>": the pid, or 0 when the name is not a temporary directory's.
long temp_dir_pid(const std::string& name) {
  if (name.empty() || name[0] != '.') return 0;
  const std::size_t at = name.rfind(".tmp-");
  if (at == std::string::npos || at == 0) return 0;
  return std::strtol(name.c_str() + at + 5, nullptr, 10);
}

// A writer holds the lock; a dead writer's lock is free. No lock file yet (the window
// between mkdir and flock, or an older memra): the pid decides.
bool writer_alive(const fs::path& tmp, long pid) {
  const int fd = ::open((tmp / kWriterLock).c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return pid > 0 && !(::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the lock taken for the test, if any
  return held;
}

uint64_t tree_bytes(const fs::path& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) n += it->file_size(e2);
  }
  return n;
}

}  // namespace

std::vector<fs::path> stale_temp_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const long pid = temp_dir_pid(e.path().filename().string());
    std::error_code e2;
    if (pid != 0 && e.is_directory(e2) && !writer_alive(e.path(), pid)) out.push_back(e.path());
  }
  return out;
}

StaleTempDirs remove_stale_temp_dirs(const fs::path& dir) {
  StaleTempDirs out;
  for (const fs::path& p : stale_temp_dirs(dir)) {
    const uint64_t bytes = tree_bytes(p);
    std::error_code ec;
    if (fs::remove_all(p, ec) > 0 && !ec) {
      ++out.removed;
      out.bytes += bytes;
    }
  }
  return out;
}

namespace {

bool safe_relative(std::string_view name) {
  if (name.empty() || name.front() == '/') return false;
  const fs::path p(name);
  for (const auto& part : p)
    if (part == ".." || part == ".") return false;
  return true;
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<std::unique_ptr<Writer>> Writer::create(const fs::path& destination, WriterOptions options) {
  std::unique_ptr<Writer> w(new Writer());
  w->options_ = std::move(options);
  w->dst_ = fs::absolute(destination).lexically_normal();
  if (w->dst_.filename().empty()) w->dst_ = w->dst_.parent_path();  // "out/" -> "out"
  std::error_code ec;
  const fs::path parent = w->dst_.parent_path();
  if (!fs::is_directory(parent, ec))
    return make_error(ErrorCode::not_found, "the output's parent directory " + parent.string() + " does not exist; create it first");
  if (!w->options_.name_at_commit && fs::symlink_status(w->dst_, ec).type() != fs::file_type::not_found &&
      !w->options_.overwrite)
    return make_error(ErrorCode::conflict, w->dst_.string() + " already exists; remove it or pass --force to replace it");
  remove_stale_temp_dirs(parent);
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%ld-%08x", static_cast<long>(::getpid()), static_cast<unsigned>(rd()));
    const fs::path tmp = parent / (temp_prefix(w->dst_) + suffix);
    if (::mkdir(tmp.c_str(), 0755) == 0) {
      w->tmp_ = tmp;
      w->lock_fd_ = ::open((tmp / kWriterLock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (w->lock_fd_ < 0 || ::flock(w->lock_fd_, LOCK_EX | LOCK_NB) != 0)
        return io_error("cannot lock the temporary directory", tmp, errno);
      return w;
    }
    if (errno != EEXIST) return io_error("cannot create the temporary directory", tmp, errno);
  }
  return make_error(ErrorCode::io, "cannot create a temporary directory next to " + w->dst_.string());
}

Writer::~Writer() {
  if (!committed_) abort();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void Writer::abort() {
  for (int fd : blob_fds_)
    if (fd >= 0) ::close(fd);
  blob_fds_.clear();
  if (committed_ || aborted_ || tmp_.empty()) return;
  aborted_ = true;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

Status Writer::fault(std::string_view point) const {
  if (options_.fault) return options_.fault(point);
  return {};
}

Status Writer::layout(std::vector<TensorEntry>& tensors) {
  if (!blobs_.empty()) return make_error(ErrorCode::internal, "Writer::layout called twice");
  uint64_t end = 0;
  for (TensorEntry& t : tensors) {
    uint64_t off = (end + kAlignment - 1) / kAlignment * kAlignment;
    if (blobs_.empty() || (off + t.bytes > options_.max_blob_bytes && end > 0)) {
      char name[32];
      std::snprintf(name, sizeof name, "weights-%05zu.bin", blobs_.size());
      blobs_.push_back({name, 0});
      off = 0;
    }
    t.blob = static_cast<uint32_t>(blobs_.size() - 1);
    t.offset = off;
    end = off + t.bytes;
    blobs_.back().size = end;
  }
  if (blobs_.empty()) blobs_.push_back({"weights-00000.bin", 0});
  for (const BlobInfo& b : blobs_) {
    const fs::path p = tmp_ / b.file;
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return io_error("cannot create", p, errno);
    blob_fds_.push_back(fd);
    if (::ftruncate(fd, static_cast<off_t>(b.size)) != 0) return io_error("cannot size", p, errno);
  }
  return {};
}

TensorStream::TensorStream(int fd, fs::path path, const TensorEntry& t)
    : fd_(fd), path_(std::move(path)), name_(t.name), offset_(t.offset), bytes_(t.bytes), hash_(std::make_shared<Crc32c>()) {}

Status TensorStream::write(const void* data, uint64_t n) {
  if (n > bytes_ - done_)
    return make_error(ErrorCode::internal, "tensor '" + name_ + "': " + std::to_string(done_ + n) + " bytes written, " +
                                               std::to_string(bytes_) + " planned");
  auto* h = static_cast<Crc32c*>(hash_.get());
  constexpr uint64_t kChunk = uint64_t{4} << 20;
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t k = 0; k < n;) {
    const uint64_t m = std::min(kChunk, n - k);
    h->update(p + k, static_cast<size_t>(m));  // checksum, then write while it is in cache
    MEMRA_TRY(write_all(fd_, p + k, m, offset_ + done_, path_));
    done_ += m;
    k += m;
  }
  return {};
}

Result<std::string> TensorStream::finish() {
  if (done_ != bytes_)
    return make_error(ErrorCode::internal, "tensor '" + name_ + "': " + std::to_string(done_) + " of " + std::to_string(bytes_) + " bytes written");
  return static_cast<Crc32c*>(hash_.get())->hex();
}

Result<TensorStream> Writer::open_tensor(const TensorEntry& t) {
  MEMRA_TRY(fault("tensor"));
  if (t.blob >= blob_fds_.size()) return make_error(ErrorCode::internal, "tensor '" + t.name + "' has no blob; call layout() first");
  return TensorStream(blob_fds_[t.blob], tmp_ / blobs_[t.blob].file, t);
}

Result<std::string> Writer::write_tensor(const TensorEntry& t, const void* data, const std::function<bool()>& cancelled) {
  auto stream = open_tensor(t);
  if (!stream) return stream.error();
  constexpr uint64_t kPiece = uint64_t{64} << 20;
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t done = 0; done < t.bytes; done += kPiece) {
    if (cancelled && cancelled()) return make_error(ErrorCode::io, "interrupted");
    MEMRA_TRY(stream->write(p + done, std::min(kPiece, t.bytes - done)));
  }
  return stream->finish();
}

Status Writer::write_file(std::string_view name, std::string_view contents) {
  if (!safe_relative(name)) return make_error(ErrorCode::invalid_argument, "bad file name '" + std::string(name) + "' in a .memra directory");
  const fs::path p = tmp_ / fs::path(name);
  if (p.parent_path() != tmp_) {
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) return io_error("cannot create", p.parent_path(), ec.value());
    subdirs_.push_back(p.parent_path());
  }
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create", p, errno);
  Status st = write_all(fd, reinterpret_cast<const uint8_t*>(contents.data()), contents.size(), 0, p);
  if (st && options_.fsync && ::fsync(fd) != 0) st = io_error("cannot fsync", p, errno);
  ::close(fd);
  return st;
}

Status Writer::copy_file(const fs::path& from, std::string_view name) {
  const int fd = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open", from, errno);
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return io_error("cannot read", from, e);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return write_file(name, data);
}

Result<std::string> Writer::commit(Manifest& m, const fs::path& destination) {
  const fs::path dst = fs::absolute(destination).lexically_normal();
  if (dst.parent_path() != dst_.parent_path())
    return make_error(ErrorCode::internal, "Writer::commit: " + dst.string() + " is not beside " + dst_.string());
  dst_ = dst;
  return commit(m);
}

Result<std::string> Writer::commit(Manifest& m) {
  if (committed_ || aborted_) return make_error(ErrorCode::internal, "Writer::commit after commit or abort");
  m.blobs = blobs_;
  m.alignment = kAlignment;
  MEMRA_TRY(fault("manifest"));
  if (options_.fsync)
    for (size_t i = 0; i < blob_fds_.size(); ++i)
      if (::fsync(blob_fds_[i]) != 0) return io_error("cannot fsync", tmp_ / blobs_[i].file, errno);
  for (int fd : blob_fds_) ::close(fd);
  blob_fds_.clear();
  const std::string text = manifest_to_json(m);
  MEMRA_TRY(write_file(kManifestFile, text));
  // The lock file stays out of the finished directory; the lock itself is held (on the
  // open descriptor) until this Writer goes.
  ::unlink((tmp_ / kWriterLock).c_str());
  if (options_.fsync) {
    for (const fs::path& d : subdirs_) MEMRA_TRY(fsync_path(d, true));
    MEMRA_TRY(fsync_path(tmp_, true));
  }
  MEMRA_TRY(fault("rename"));
  std::error_code ec;
  const bool exists = fs::symlink_status(dst_, ec).type() != fs::file_type::not_found;
  if (exists && !options_.overwrite)
    return make_error(ErrorCode::conflict, dst_.string() + " appeared while writing; remove it or pass --force");
  if (exists) {
    // Swap atomically, then drop the old contents (now under the temporary name).
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, dst_.c_str(), RENAME_EXCHANGE) != 0)
      return io_error("cannot replace", dst_, errno);
    committed_ = true;
    fs::remove_all(tmp_, ec);
  } else {
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, dst_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST) return make_error(ErrorCode::conflict, dst_.string() + " appeared while writing");
      return io_error("cannot rename the finished output to", dst_, errno);
    }
    committed_ = true;
  }
  if (options_.fsync) MEMRA_TRY(fsync_path(dst_.parent_path(), true));
  return sha256_hex(text.data(), text.size());
}

}  // namespace memra::format
