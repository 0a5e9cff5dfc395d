// Internals shared by the registry's translation units (not part of the API).
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>

#include "registry/registry.hpp"
#include "registry/sqlite.hpp"

namespace memra::registry {

struct Registry::Impl {
  sql::Db db;
  std::filesystem::path path;
  // One connection per Registry; the mutex keeps a transaction's statements
  // together when a Registry is shared between threads.
  mutable std::mutex mu;
};

// SQL expression for "now" as ISO-8601 UTC with milliseconds.
inline constexpr std::string_view kNowSql = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";

// Absolute, lexically normal, no trailing separator. Never touches the file system
// beyond reading the current directory.
std::string normalize_path(std::string_view path);

// Checks a combo key: family/quant are lower-case names, arch is known, drafter is
// "" or a printable name. Returns invalid_argument with what to do otherwise.
Status validate_key(const ComboKey& key);
Status validate_name(std::string_view what, std::string_view value);

}  // namespace memra::registry
