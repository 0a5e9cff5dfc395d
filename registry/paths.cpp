// Where the registry lives by default, and how stored paths are normalised.
#include <cstdlib>
#include <system_error>

#include "registry/impl.hpp"

namespace memra::registry {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

Result<std::filesystem::path> memra_home() {
  if (const char* home = env("MEMRA_HOME")) return std::filesystem::path(home);
  if (const char* home = env("HOME")) return std::filesystem::path(home) / ".memra";
  return make_error(ErrorCode::not_found,
                    "neither MEMRA_HOME nor HOME is set, so the registry has no default location; set MEMRA_HOME "
                    "(or MEMRA_REGISTRY, or pass --db PATH)");
}

Result<std::filesystem::path> default_path() {
  if (const char* db = env("MEMRA_REGISTRY")) return std::filesystem::path(db);
  auto home = memra_home();
  if (!home.ok()) return home.error();
  return *home / "registry.db";
}

std::string normalize_path(std::string_view path) {
  std::filesystem::path p(path);
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (!ec) p = abs;
  p = p.lexically_normal();
  // "dir/" and "dir" name the same thing; store the form without the separator.
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

}  // namespace memra::registry
