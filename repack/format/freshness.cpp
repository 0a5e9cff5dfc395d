#include "repack/format/freshness.hpp"

#include "repack/format/sha256.hpp"

namespace memra::format {

namespace fs = std::filesystem;

bool source_unchanged(const MemraModel& repack, std::string* why) {
  auto say = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  std::error_code ec;
  const auto made = fs::last_write_time(repack.dir() / std::string(kManifestFile), ec);
  if (ec) return say("its manifest cannot be read");
  const fs::path source = repack.manifest().source.path;
  auto same = [&](const fs::path& p, uint64_t size) {
    std::error_code e2;
    const auto actual = fs::file_size(p, e2);
    if (e2) return say(p.string() + " is gone");
    if (actual != size) return say(p.string() + " has " + std::to_string(actual) + " bytes, the repack was made from " +
                                   std::to_string(size));
    const auto mtime = fs::last_write_time(p, e2);
    if (e2 || mtime > made) return say(p.string() + " was modified after the repack");
    return true;
  };
  if (!fs::is_directory(source, ec)) return same(source, repack.manifest().source.size);
  // The weight files and the config and tokenizer files it copied: a changed config
  // makes a different model.
  for (const SourceFile& f : repack.manifest().source.files)
    if (!same(source / f.path, f.size)) return false;
  return true;
}

Result<std::string> manifest_sha256(const fs::path& dir) { return sha256_file((dir / std::string(kManifestFile)).string()); }

}  // namespace memra::format
