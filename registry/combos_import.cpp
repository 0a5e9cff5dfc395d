// Importing combos files: the shipped one (versioned, imported once per version)
// and user files. Precedence of a row's source: gate > import:vN > shipped:vN.
#include <fstream>
#include <sstream>

#include "registry/impl.hpp"
#include "registry/json.hpp"

namespace memra::registry {
namespace {

enum class Layer { shipped, user };

Result<std::optional<std::string>> row_source(sql::Db& db, const ComboKey& key) {
  auto stmt = sql::Stmt::prepare(db, "SELECT source FROM combos WHERE family = ?1 AND quant = ?2 AND drafter = ?3 "
                                     "AND arch = ?4");
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, key.family).bind(2, key.quant).bind(3, key.drafter).bind(4, key.arch);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(stmt->text(0));
}

bool may_replace(Layer layer, const std::string& existing, bool overwrite_local) {
  if (existing.rfind("shipped:", 0) == 0) return true;
  if (existing.rfind("import:", 0) == 0) return layer == Layer::user;
  return layer == Layer::user && overwrite_local;  // "gate" (or anything unknown) is local evidence
}

// Caller holds the lock and an open transaction.
Result<ImportReport> apply(sql::Db& db, const ComboFile& file, Layer layer, bool overwrite_local) {
  ImportReport report;
  report.version = file.version;
  std::string source = (layer == Layer::shipped ? "shipped:v" : "import:v") + std::to_string(file.version);
  std::string upsert =
      "INSERT INTO combos(family, quant, drafter, arch, verdict, evidence, source, updated_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, json(?6), ?7, " + std::string(kNowSql) + ") "
      "ON CONFLICT(family, quant, drafter, arch) DO UPDATE SET verdict = excluded.verdict, "
      "evidence = excluded.evidence, source = excluded.source, updated_at = excluded.updated_at";
  for (const ComboFileEntry& e : file.combos) {
    auto existing = row_source(db, e.key);
    if (!existing.ok()) return existing.error();
    if (*existing && !may_replace(layer, **existing, overwrite_local)) {
      ++report.kept_local;
      continue;
    }
    auto stmt = sql::Stmt::prepare(db, upsert);
    if (!stmt.ok()) return stmt.error();
    stmt->bind(1, e.key.family).bind(2, e.key.quant).bind(3, e.key.drafter).bind(4, e.key.arch);
    stmt->bind(5, std::string_view(to_string(e.verdict))).bind(6, e.evidence_json).bind(7, source);
    MEMRA_TRY(stmt->run());
    ++(*existing ? report.updated : report.inserted);
  }
  if (layer == Layer::shipped) {
    // Rows an older shipped file vouched for and this one no longer lists.
    auto stmt = sql::Stmt::prepare(db, "DELETE FROM combos WHERE source LIKE 'shipped:%' AND source <> ?1 "
                                       "RETURNING 1");
    if (!stmt.ok()) return stmt.error();
    stmt->bind(1, source);
    for (;;) {
      auto row = stmt->step();
      if (!row.ok()) return row.error();
      if (!*row) break;
      ++report.removed;
    }
  }
  return report;
}

Result<int> shipped_version_locked(sql::Db& db) {
  auto stmt = sql::Stmt::prepare(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'shipped_combos_version'");
  if (!stmt.ok()) return stmt.error();
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  return *row ? static_cast<int>(stmt->int64(0)) : 0;
}

}  // namespace

Result<ImportReport> Registry::import_shipped(std::string_view json_text) {
  auto file = parse_combos_file(json_text, "the built-in combos (registry/data/combos.json)");
  if (!file.ok()) return file.error();

  std::lock_guard lock(impl_->mu);
  sql::Db& db = impl_->db;
  // Cheap check before taking the write lock: most opens have nothing to import.
  auto current = shipped_version_locked(db);
  if (!current.ok()) return current.error();
  if (*current >= file->version) {
    ImportReport skipped;
    skipped.version = file->version;
    skipped.skipped = true;
    return skipped;
  }
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  current = shipped_version_locked(db);  // another process may have imported meanwhile
  if (!current.ok()) return current.error();
  if (*current >= file->version) {
    ImportReport skipped;
    skipped.version = file->version;
    skipped.skipped = true;
    return skipped;
  }
  auto report = apply(db, *file, Layer::shipped, false);
  if (!report.ok()) return report.error();
  auto set = sql::Stmt::prepare(db, "INSERT INTO meta(key, value) VALUES ('shipped_combos_version', ?1) "
                                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  if (!set.ok()) return set.error();
  set->bind(1, std::to_string(file->version));
  MEMRA_TRY(set->run());
  MEMRA_TRY(tx->commit());
  return report;
}

Result<ImportReport> Registry::import_combos(const std::filesystem::path& path, const ImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCode::not_found, "cannot read combos file '" + path.string() +
                                                "': check the path (the shipped file is installed as "
                                                "share/memra/combos.json)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::io, "error while reading combos file '" + path.string() + "'");
  auto file = parse_combos_file(text.str(), path.string());
  if (!file.ok()) return file.error();

  std::lock_guard lock(impl_->mu);
  auto tx = sql::Transaction::begin(impl_->db);
  if (!tx.ok()) return tx.error();
  auto report = apply(impl_->db, *file, Layer::user, options.overwrite_local);
  if (!report.ok()) return report.error();
  MEMRA_TRY(tx->commit());
  return report;
}

}  // namespace memra::registry
