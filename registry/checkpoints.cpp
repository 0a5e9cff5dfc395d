// Provenance: checkpoints and the repacks made from them.
#include <cctype>

#include "registry/impl.hpp"

namespace memra::registry {
namespace {

constexpr std::string_view kCheckpointColumns =
    "id, source_path, format, sha256, size_bytes, family, architecture, quant, parameters, recorded_at";
constexpr std::string_view kRepackColumns =
    "id, checkpoint_id, output_path, output_hash, tool_version, options, created_at";

Checkpoint read_checkpoint(const sql::Stmt& s) {
  Checkpoint c;
  c.id = s.int64(0);
  c.source_path = s.text(1);
  auto format = parse_format(s.text(2));
  c.format = format.ok() ? *format : CheckpointFormat::safetensors;  // the schema CHECK keeps it valid
  c.sha256 = s.text(3);
  c.size_bytes = static_cast<std::uint64_t>(s.int64(4));
  c.family = s.text(5);
  c.architecture = s.text(6);
  c.quant = s.text(7);
  c.parameters_json = s.text(8);
  c.recorded_at = s.text(9);
  return c;
}

Repack read_repack(const sql::Stmt& s) {
  Repack r;
  r.id = s.int64(0);
  r.checkpoint_id = s.int64(1);
  r.output_path = s.text(2);
  r.output_hash = s.text(3);
  r.tool_version = s.text(4);
  r.options_json = s.text(5);
  r.created_at = s.text(6);
  return r;
}

template <class Row, class Read>
Result<std::vector<Row>> collect(sql::Stmt& stmt, Read read) {
  std::vector<Row> rows;
  for (;;) {
    auto more = stmt.step();
    if (!more.ok()) return more.error();
    if (!*more) return rows;
    rows.push_back(read(stmt));
  }
}

// A single checkpoint selected by `where` with one bound parameter.
template <class Bind>
Result<std::optional<Checkpoint>> select_one(sql::Db& db, std::string_view where, Bind bind) {
  std::string q = "SELECT " + std::string(kCheckpointColumns) + " FROM checkpoints WHERE " + std::string(where);
  auto stmt = sql::Stmt::prepare(db, q);
  if (!stmt.ok()) return stmt.error();
  bind(*stmt);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<Checkpoint>();
  return std::optional<Checkpoint>(read_checkpoint(*stmt));
}

bool is_sha256(std::string_view s) {
  if (s.size() != 64) return false;
  for (char ch : s)
    if (!std::isxdigit(static_cast<unsigned char>(ch))) return false;
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// JSON text must be an object; checked by sqlite's JSON functions.
Status check_json_object(sql::Db& db, std::string_view what, std::string_view text) {
  auto stmt = sql::Stmt::prepare(db, "SELECT CASE WHEN json_valid(?1) THEN json_type(?1) = 'object' ELSE 0 END");
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, text);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (*row && stmt->int64(0) == 1) return {};
  return make_error(ErrorCode::invalid_argument,
                    std::string(what) + " must be a JSON object (got '" + std::string(text.substr(0, 80)) + "')");
}

}  // namespace

Result<Checkpoint> Registry::record_checkpoint(const CheckpointInfo& info) {
  if (info.source_path.empty())
    return make_error(ErrorCode::invalid_argument, "record_checkpoint: source_path is empty");
  if (!is_sha256(info.sha256))
    return make_error(ErrorCode::invalid_argument,
                      "record_checkpoint: sha256 must be 64 hex digits (got '" + info.sha256 + "')");
  MEMRA_TRY(validate_name("family", info.family));
  MEMRA_TRY(validate_name("quant", info.quant));
  if (info.size_bytes > static_cast<std::uint64_t>(INT64_MAX))
    return make_error(ErrorCode::invalid_argument, "record_checkpoint: size_bytes is out of range");

  std::lock_guard lock(impl_->mu);
  sql::Db& db = impl_->db;
  MEMRA_TRY(check_json_object(db, "checkpoint parameters", info.parameters_json));
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  std::string q =
      "INSERT INTO checkpoints(source_path, format, sha256, size_bytes, family, architecture, quant, parameters, "
      "recorded_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, json(?8), " + std::string(kNowSql) +
      ") ON CONFLICT(source_path, sha256) DO UPDATE SET format = excluded.format, size_bytes = excluded.size_bytes, "
      "family = excluded.family, architecture = excluded.architecture, quant = excluded.quant, "
      "parameters = excluded.parameters RETURNING id";
  auto stmt = sql::Stmt::prepare(db, q);
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, normalize_path(info.source_path))
      .bind(2, std::string_view(to_string(info.format)))
      .bind(3, lower(info.sha256))
      .bind(4, static_cast<std::int64_t>(info.size_bytes))
      .bind(5, info.family)
      .bind(6, info.architecture)
      .bind(7, info.quant)
      .bind(8, info.parameters_json);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return make_error(ErrorCode::internal, "record_checkpoint: the insert returned no id");
  std::int64_t id = stmt->int64(0);
  MEMRA_TRY(stmt->run());
  auto saved = select_one(db, "id = ?1", [&](sql::Stmt& s) { s.bind(1, id); });
  if (!saved.ok()) return saved.error();
  if (!*saved) return make_error(ErrorCode::internal, "record_checkpoint: the new row vanished");
  MEMRA_TRY(tx->commit());
  return std::move(**saved);
}

Result<Repack> Registry::record_repack(const RepackInfo& info) {
  if (info.output_path.empty()) return make_error(ErrorCode::invalid_argument, "record_repack: output_path is empty");
  if (info.output_hash.empty()) return make_error(ErrorCode::invalid_argument, "record_repack: output_hash is empty");
  if (info.tool_version.empty())
    return make_error(ErrorCode::invalid_argument, "record_repack: tool_version is empty");

  std::lock_guard lock(impl_->mu);
  sql::Db& db = impl_->db;
  MEMRA_TRY(check_json_object(db, "repack options", info.options_json));
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  auto parent = select_one(db, "id = ?1", [&](sql::Stmt& s) { s.bind(1, info.checkpoint_id); });
  if (!parent.ok()) return parent.error();
  if (!*parent)
    return make_error(ErrorCode::not_found, "record_repack: no checkpoint with id " +
                                                std::to_string(info.checkpoint_id) +
                                                " in '" + impl_->path.string() +
                                                "'; record the source with record_checkpoint first");
  std::string q = "INSERT INTO repacks(checkpoint_id, output_path, output_hash, tool_version, options, created_at) "
                  "VALUES (?1, ?2, ?3, ?4, json(?5), " + std::string(kNowSql) + ") RETURNING " +
                  std::string(kRepackColumns);
  auto stmt = sql::Stmt::prepare(db, q);
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, info.checkpoint_id)
      .bind(2, normalize_path(info.output_path))
      .bind(3, info.output_hash)
      .bind(4, info.tool_version)
      .bind(5, info.options_json);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return make_error(ErrorCode::internal, "record_repack: the insert returned no row");
  Repack repack = read_repack(*stmt);
  MEMRA_TRY(stmt->run());
  MEMRA_TRY(tx->commit());
  return repack;
}

namespace {

Result<bool> delete_where(sql::Db& db, const std::string& sql, std::int64_t id) {
  auto tx = sql::Transaction::begin(db);
  if (!tx.ok()) return tx.error();
  auto stmt = sql::Stmt::prepare(db, sql + " RETURNING id");
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, id);
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  const bool found = *row;
  MEMRA_TRY(stmt->run());
  MEMRA_TRY(tx->commit());
  return found;
}

}  // namespace

Result<bool> Registry::delete_repack(std::int64_t id) {
  std::lock_guard lock(impl_->mu);
  return delete_where(impl_->db, "DELETE FROM repacks WHERE id = ?1", id);
}

Result<bool> Registry::delete_checkpoint(std::int64_t id) {
  std::lock_guard lock(impl_->mu);
  // ON DELETE CASCADE (foreign keys are on) takes its repacks.
  return delete_where(impl_->db, "DELETE FROM checkpoints WHERE id = ?1", id);
}

Result<std::vector<Checkpoint>> Registry::list_checkpoints() const {
  std::lock_guard lock(impl_->mu);
  auto stmt = sql::Stmt::prepare(impl_->db, "SELECT " + std::string(kCheckpointColumns) +
                                                " FROM checkpoints ORDER BY id");
  if (!stmt.ok()) return stmt.error();
  return collect<Checkpoint>(*stmt, read_checkpoint);
}

Result<std::vector<Repack>> Registry::list_repacks(std::optional<std::int64_t> checkpoint_id) const {
  std::lock_guard lock(impl_->mu);
  std::string q = "SELECT " + std::string(kRepackColumns) + " FROM repacks" +
                  (checkpoint_id ? " WHERE checkpoint_id = ?1" : "") + " ORDER BY id";
  auto stmt = sql::Stmt::prepare(impl_->db, q);
  if (!stmt.ok()) return stmt.error();
  if (checkpoint_id) stmt->bind(1, *checkpoint_id);
  return collect<Repack>(*stmt, read_repack);
}

Result<Checkpoint> Registry::find_checkpoint(std::string_view key) const {
  if (key.empty()) return make_error(ErrorCode::invalid_argument, "find_checkpoint: empty key");
  std::lock_guard lock(impl_->mu);
  sql::Db& db = impl_->db;

  bool digits = key.size() <= 18;
  for (char ch : key) digits = digits && ch >= '0' && ch <= '9';
  if (digits) {
    std::int64_t id = std::stoll(std::string(key));
    auto found = select_one(db, "id = ?1", [&](sql::Stmt& s) { s.bind(1, id); });
    if (!found.ok()) return found.error();
    if (*found) return std::move(**found);
  }
  if (is_sha256(key)) {
    // The same bytes may sit at several paths; the latest record wins.
    auto found = select_one(db, "sha256 = ?1 ORDER BY id DESC LIMIT 1",
                            [&](sql::Stmt& s) { s.bind(1, lower(key)); });
    if (!found.ok()) return found.error();
    if (*found) return std::move(**found);
  }
  std::string path = normalize_path(key);
  auto found = select_one(db, "source_path = ?1 ORDER BY id DESC LIMIT 1", [&](sql::Stmt& s) { s.bind(1, path); });
  if (!found.ok()) return found.error();
  if (*found) return std::move(**found);
  found = select_one(db,
                     "id = (SELECT checkpoint_id FROM repacks WHERE output_path = ?1 ORDER BY id DESC LIMIT 1)",
                     [&](sql::Stmt& s) { s.bind(1, path); });
  if (!found.ok()) return found.error();
  if (*found) return std::move(**found);
  return make_error(ErrorCode::not_found, "no checkpoint in '" + impl_->path.string() + "' matches '" +
                                              std::string(key) +
                                              "' (as id, sha256, source path or repack output path); "
                                              "'memra-registry list' shows what is recorded");
}

}  // namespace memra::registry
