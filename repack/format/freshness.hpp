// Whether a .memra repack still matches what it was made from and what was recorded
// about it: the source files keep the sizes the manifest lists and are not modified
// after it, and manifest.json is the one whose sha256 the registry holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/common/result.hpp"
#include "repack/format/reader.hpp"

namespace memra::format {

// A file's modification time in nanoseconds (what SourceFile::mtime_ns records); 0 when it
// cannot be read.
int64_t file_mtime_ns(const std::filesystem::path& p);

// The source (the manifest's source.path) is there, with every file it lists (weights,
// config, tokenizer) of the size and modification time recorded (manifests without
// recorded times: not newer than the repack). `why` says what differs.
bool source_unchanged(const MemraModel& repack, std::string* why = nullptr);

// sha256 of <dir>/manifest.json (the registry's output hash of a repack).
Result<std::string> manifest_sha256(const std::filesystem::path& dir);

}  // namespace memra::format
