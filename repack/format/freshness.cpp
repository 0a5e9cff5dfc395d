#include "repack/format/freshness.hpp"

#include <chrono>

#include "repack/format/sha256.hpp"

namespace memra::format {

namespace fs = std::filesystem;

int64_t file_mtime_ns(const fs::path& p) {
  std::error_code ec;
  const auto t = fs::last_write_time(p, ec);
  if (ec) return 0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

bool source_unchanged(const MemraModel& repack, std::string* why) {
  auto say = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  std::error_code ec;
  const auto made = fs::last_write_time(repack.dir() / std::string(kManifestFile), ec);
  if (ec) return say("its manifest cannot be read");
  const fs::path source = repack.manifest().source.path;
  // The recorded time is compared for equality: "newer than the manifest" misses a same-size
  // write inside one tick of the filesystem clock.
  auto same = [&](const fs::path& p, uint64_t size, int64_t recorded_ns) {
    std::error_code e2;
    const auto actual = fs::file_size(p, e2);
    if (e2) return say(p.string() + " is gone");
    if (actual != size) return say(p.string() + " has " + std::to_string(actual) + " bytes, the repack was made from " +
                                   std::to_string(size));
    if (recorded_ns != 0) {
      if (file_mtime_ns(p) != recorded_ns) return say(p.string() + " was modified after the repack");
      return true;
    }
    const auto mtime = fs::last_write_time(p, e2);
    if (e2 || mtime > made) return say(p.string() + " was modified after the repack");
    return true;
  };
  const auto& files = repack.manifest().source.files;
  if (!fs::is_directory(source, ec))
    return same(source, repack.manifest().source.size, files.empty() ? 0 : files.front().mtime_ns);
  // The weight files and the config and tokenizer files it copied: a changed config
  // makes a different model.
  for (const SourceFile& f : files)
    if (!same(source / f.path, f.size, f.mtime_ns)) return false;
  return true;
}

Result<std::string> manifest_sha256(const fs::path& dir) { return sha256_file((dir / std::string(kManifestFile)).string()); }

}  // namespace memra::format
