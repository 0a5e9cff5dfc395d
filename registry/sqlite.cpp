#include "registry/sqlite.hpp"

#include <sqlite3.h>

#include <utility>

namespace memra::registry::sql {
namespace {

Error make_sql_error(int rc, const std::string& path, std::string_view what, const char* detail) {
  std::string msg = "registry database '" + path + "': " + std::string(what) + " failed: " +
                    (detail ? detail : sqlite3_errstr(rc)) + ". ";
  switch (rc & 0xff) {
    case SQLITE_NOTADB:
      return make_error(ErrorCode::corrupt,
                        msg + "The file is not an SQLite database, so it is not a memra registry. Move it aside "
                              "(a new registry is created where no file exists) or pass another path with "
                              "--db / MEMRA_REGISTRY.");
    case SQLITE_CORRUPT:
      return make_error(ErrorCode::corrupt,
                        msg + "The database is damaged (truncated or overwritten). Move it aside (sqlite3's "
                              "'.recover' may salvage rows) and rerun to start a fresh registry, or pass another "
                              "path with --db / MEMRA_REGISTRY.");
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return make_error(ErrorCode::conflict,
                        msg + "Another process held the registry lock longer than the busy timeout; retry, or "
                              "find the process that keeps it open.");
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_AUTH:
      return make_error(ErrorCode::io, msg + "Check that the path and its directory are writable by you and "
                                             "that the disk is not full.");
    case SQLITE_CONSTRAINT:
      return make_error(ErrorCode::invalid_argument, msg + "The values break a rule of the registry schema.");
    default:
      return make_error(ErrorCode::internal, msg + "This is unexpected; please report it with the message.");
  }
}

}  // namespace

Result<Db> Db::open(const std::string& path, int busy_timeout_ms) {
  Db db;
  db.path_ = path;
  int rc = sqlite3_open_v2(path.c_str(), &db.db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    // sqlite3_open_v2 may hand back a connection even on failure; it must be closed.
    Error err = make_sql_error(rc, path, "opening", db.db_ ? sqlite3_errmsg(db.db_) : nullptr);
    return err;
  }
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, busy_timeout_ms);
  return db;
}

Db::Db(Db&& other) noexcept : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Status Db::exec(const char* sql, std::string_view what) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &msg);
  if (rc != SQLITE_OK) {
    Error err = make_sql_error(rc, path_, what, msg);
    sqlite3_free(msg);
    return err;
  }
  return {};
}

Error Db::error(int rc, std::string_view what) const {
  return make_sql_error(rc, path_, what, db_ ? sqlite3_errmsg(db_) : nullptr);
}

Result<Stmt> Stmt::prepare(Db& db, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    if (stmt) sqlite3_finalize(stmt);
    return db.error(rc, "preparing a query");
  }
  return Stmt(db, stmt);
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), bind_error_(std::move(other.bind_error_)) {}

Stmt::~Stmt() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Stmt& Stmt::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: sqlite copies the bytes, so temporaries are safe to pass.
  int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_.empty()) bind_error_ = sqlite3_errstr(rc);
  return *this;
}

Stmt& Stmt::bind(int index, std::int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_.empty()) bind_error_ = sqlite3_errstr(rc);
  return *this;
}

Stmt& Stmt::bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_.empty()) bind_error_ = sqlite3_errstr(rc);
  return *this;
}

Stmt& Stmt::bind(int index, std::optional<double> value) {
  return value ? bind(index, *value) : bind_null(index);
}

Stmt& Stmt::bind_null(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_.empty()) bind_error_ = sqlite3_errstr(rc);
  return *this;
}

Result<bool> Stmt::step() {
  if (!bind_error_.empty()) return make_error(ErrorCode::internal, "binding a query parameter: " + bind_error_);
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->error(rc, "running a query");
}

Status Stmt::run() {
  for (;;) {
    auto r = step();
    if (!r.ok()) return r.error();
    if (!*r) return {};
  }
}

std::int64_t Stmt::int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::real(int col) const { return sqlite3_column_double(stmt_, col); }
bool Stmt::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

std::string Stmt::text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
}

Result<Transaction> Transaction::begin(Db& db) {
  MEMRA_TRY(db.exec("BEGIN IMMEDIATE", "starting a write transaction"));
  return Transaction(db);
}

Transaction::~Transaction() {
  if (db_) sqlite3_exec(db_->get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

Status Transaction::commit() {
  if (!db_) return make_error(ErrorCode::internal, "commit of a finished transaction");
  Status s = db_->exec("COMMIT", "committing a write transaction");
  if (s.ok()) db_ = nullptr;  // on failure the destructor rolls back
  return s;
}

}  // namespace memra::registry::sql
