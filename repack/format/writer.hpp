// Writes a .memra directory atomically.
//
// Everything goes into a temporary directory next to the destination
// (".<name>.tmp-<pid>-<random>"); commit() writes manifest.json, fsyncs every file and
// the directory, and renames it to the destination (RENAME_NOREPLACE, or an atomic
// exchange with an existing destination when overwriting), then fsyncs the parent. A
// reader therefore sees either no destination or a complete one. Any failure, abort() or
// destruction before commit removes the temporary directory. While it writes, a Writer
// holds an flock on ".writer.lock" inside its temporary directory, so a temporary
// directory whose lock is free belongs to a process that died (kill -9, power loss):
// remove_stale_temp_dirs() removes those, and every Writer does so in its parent.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/common/result.hpp"
#include "repack/format/manifest.hpp"

namespace memra::format {

struct WriterOptions {
  // Tensors go into blobs of at most this many bytes (one tensor larger than this gets a
  // blob of its own).
  uint64_t max_blob_bytes = uint64_t{16} << 30;
  bool fsync = true;
  // Replace an existing destination (atomically); otherwise its existence is an error.
  bool overwrite = false;
  // The final name is given to commit() (content-named repacks, whose name needs the
  // source digest computed while writing); `destination` only places the temporary
  // directory, and its existence is not checked at create().
  bool name_at_commit = false;
  // Test hook, called at "tensor" (before each tensor write), "manifest" and "rename";
  // an error it returns fails the write exactly as an I/O error there would.
  std::function<Status(std::string_view point)> fault;
};

class Writer;

// Sequential writes of one tensor's bytes into its place, hashed on the way.
class TensorStream {
 public:
  Status write(const void* data, uint64_t n);
  // Error unless exactly the tensor's bytes were written; else their CRC-32C (hex).
  Result<std::string> finish();

 private:
  friend class Writer;
  TensorStream(int fd, std::filesystem::path path, const TensorEntry& t);
  int fd_;
  std::filesystem::path path_;
  std::string name_;
  uint64_t offset_, bytes_, done_ = 0;
  std::shared_ptr<void> hash_;
};

class Writer {
 public:
  static Result<std::unique_ptr<Writer>> create(const std::filesystem::path& destination, WriterOptions options = {});
  ~Writer();  // abort() unless committed
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  const std::filesystem::path& destination() const { return dst_; }
  const std::filesystem::path& temp_dir() const { return tmp_; }

  // Assigns every tensor a blob and an aligned offset from its `bytes`, and creates the
  // blob files at their final sizes. Call once, before write_tensor.
  Status layout(std::vector<TensorEntry>& tensors);
  const std::vector<BlobInfo>& blobs() const { return blobs_; }

  // Writes one tensor's bytes (t.bytes of them) at its place and returns their CRC-32C.
  // Thread-safe for distinct tensors. `cancelled`, when set, is polled between chunks.
  Result<std::string> write_tensor(const TensorEntry& t, const void* data, const std::function<bool()>& cancelled = {});
  // The same in pieces (for tensors converted chunk by chunk). Thread-safe likewise.
  Result<TensorStream> open_tensor(const TensorEntry& t);

  // A small file inside the directory ("tokenizer.json", "source/config.json").
  Status write_file(std::string_view name, std::string_view contents);
  Status copy_file(const std::filesystem::path& from, std::string_view name);

  // Fills manifest.blobs and alignment, writes manifest.json, makes everything durable
  // and renames into place. Returns the sha256 of manifest.json (the repack's output
  // hash in the registry).
  Result<std::string> commit(Manifest& manifest);
  // The same with the final directory named now (in the same parent). A destination that
  // exists already (and no overwrite) fails with ErrorCode::conflict, the temporary
  // directory kept until abort() or destruction.
  Result<std::string> commit(Manifest& manifest, const std::filesystem::path& destination);

  // Removes the temporary directory. Idempotent.
  void abort();

 private:
  Writer() = default;
  Status fault(std::string_view point) const;

  std::filesystem::path dst_, tmp_;
  WriterOptions options_;
  std::vector<BlobInfo> blobs_;
  std::vector<int> blob_fds_;
  int lock_fd_ = -1;  // flock on tmp_/.writer.lock while writing
  std::vector<std::filesystem::path> subdirs_;
  bool committed_ = false;
  bool aborted_ = false;
};

// Removes the temporary directories in `dir` left by writers that died (their lock is
// free, or, for a directory without one, their pid is gone). Returns how many, and
// their bytes.
struct StaleTempDirs {
  std::size_t removed = 0;
  std::uint64_t bytes = 0;
};
StaleTempDirs remove_stale_temp_dirs(const std::filesystem::path& dir);
// The same directories, listed and not removed.
std::vector<std::filesystem::path> stale_temp_dirs(const std::filesystem::path& dir);

// Current time as ISO-8601 UTC ("2026-01-02T03:04:05Z").
std::string utc_now_iso8601();

}  // namespace memra::format
