// The registry schema as an ordered list of migrations. Never edit a shipped
// migration: append a new one and raise kSchemaVersion in registry.hpp.
#include "registry/migrations.hpp"

#include <charconv>
#include <string>
#include <vector>

#include "registry/registry.hpp"

namespace memra::registry {
namespace {

struct Migration {
  int version;
  const char* sql;
};

// Arch names are checked in code (new GPU generations should not need a table
// rebuild); format and verdict are closed sets, so the schema checks them.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO meta(key, value) VALUES ('app', 'memra-registry');
INSERT INTO meta(key, value) VALUES ('created_at', strftime('%Y-%m-%dT%H:%M:%fZ','now'));
INSERT INTO meta(key, value) VALUES ('shipped_combos_version', '0');

CREATE TABLE checkpoints (
  id           INTEGER PRIMARY KEY,
  source_path  TEXT NOT NULL,
  format       TEXT NOT NULL CHECK (format IN ('safetensors', 'gguf', 'memra')),
  sha256       TEXT NOT NULL CHECK (length(sha256) = 64),
  size_bytes   INTEGER NOT NULL CHECK (size_bytes >= 0),
  family       TEXT NOT NULL,
  architecture TEXT NOT NULL,
  quant        TEXT NOT NULL,
  parameters   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(parameters)),
  recorded_at  TEXT NOT NULL,
  UNIQUE (source_path, sha256)
);
CREATE INDEX checkpoints_by_sha256 ON checkpoints(sha256);

CREATE TABLE repacks (
  id            INTEGER PRIMARY KEY,
  checkpoint_id INTEGER NOT NULL REFERENCES checkpoints(id) ON DELETE CASCADE,
  output_path   TEXT NOT NULL,
  output_hash   TEXT NOT NULL,
  tool_version  TEXT NOT NULL,
  options       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(options)),
  created_at    TEXT NOT NULL
);
CREATE INDEX repacks_by_checkpoint ON repacks(checkpoint_id);
CREATE INDEX repacks_by_output ON repacks(output_path);

CREATE TABLE combos (
  family     TEXT NOT NULL,
  quant      TEXT NOT NULL,
  drafter    TEXT NOT NULL DEFAULT '',
  arch       TEXT NOT NULL,
  verdict    TEXT NOT NULL CHECK (verdict IN ('supported', 'generic', 'rejected')),
  evidence   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(evidence) AND json_type(evidence) = 'object'),
  source     TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (family, quant, drafter, arch)
);
)sql"},
};

static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "every schema version needs exactly one migration");

Error not_ours(const std::string& path, const std::string& why) {
  return make_error(ErrorCode::unsupported,
                    "'" + path + "' is an SQLite database but not a memra registry (" + why +
                        "). memra will not modify it: pass another path with --db / MEMRA_REGISTRY, or move the "
                        "file aside.");
}

}  // namespace

Result<int> inspect_schema(sql::Db& db) {
  auto tables = sql::Stmt::prepare(
      db, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  if (!tables.ok()) return tables.error();
  std::vector<std::string> names;
  bool has_meta = false;
  for (;;) {
    auto row = tables->step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    names.push_back(tables->text(0));
    if (names.back() == "meta") has_meta = true;
  }
  if (names.empty()) return 0;
  if (!has_meta) {
    std::string list;
    for (std::size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
    if (names.size() > 5) list += ", ...";
    return not_ours(db.path(), "it has tables " + list + " and no memra 'meta' table");
  }

  auto meta = sql::Stmt::prepare(db, "SELECT key, value FROM meta WHERE key IN ('app', 'schema_version')");
  if (!meta.ok()) return not_ours(db.path(), "its 'meta' table does not have memra's layout");
  std::string app, version_text;
  for (;;) {
    auto row = meta->step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    (meta->text(0) == "app" ? app : version_text) = meta->text(1);
  }
  if (app != "memra-registry") return not_ours(db.path(), "its 'meta' table does not name memra-registry");

  int version = 0;
  auto [end, ec] = std::from_chars(version_text.data(), version_text.data() + version_text.size(), version);
  if (ec != std::errc() || end != version_text.data() + version_text.size() || version < 1)
    return make_error(ErrorCode::corrupt, "registry database '" + db.path() + "' has an invalid schema_version '" +
                                              version_text +
                                              "' in its meta table. Move it aside and rerun to start a fresh "
                                              "registry, or pass another path with --db / MEMRA_REGISTRY.");
  if (version > kSchemaVersion)
    return make_error(ErrorCode::unsupported,
                      "registry database '" + db.path() + "' has schema version " + std::to_string(version) +
                          ", newer than this build of memra understands (" + std::to_string(kSchemaVersion) +
                          "). It was written by a newer memra: upgrade memra, or pass another path with --db / "
                          "MEMRA_REGISTRY. Do not edit the file's version by hand.");
  return version;
}

Status migrate(sql::Db& db) {
  auto current = inspect_schema(db);
  if (!current.ok()) return current.error();
  if (*current == kSchemaVersion) return {};

  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  // Another process may have migrated between the check above and the lock.
  current = inspect_schema(db);
  if (!current.ok()) return current.error();
  for (const Migration& m : kMigrations) {
    if (m.version <= *current) continue;
    MEMRA_TRY(db.exec(m.sql, "applying schema migration " + std::to_string(m.version)));
    auto set = sql::Stmt::prepare(db, "INSERT INTO meta(key, value) VALUES ('schema_version', ?1) "
                                      "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    if (!set.ok()) return set.error();
    set->bind(1, std::to_string(m.version));
    MEMRA_TRY(set->run());
  }
  return tx->commit();
}

}  // namespace memra::registry
