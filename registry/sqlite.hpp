// Small RAII wrappers over sqlite3's C API: a connection, a prepared statement,
// an IMMEDIATE transaction. Every failure becomes a memra::Error that names the
// database path and says what to do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/result.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace memra::registry::sql {

class Db {
 public:
  // Opens read-write, creating the file if absent. Does not touch the contents.
  static Result<Db> open(const std::string& path, int busy_timeout_ms);

  Db() = default;
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows we need.
  Status exec(const char* sql, std::string_view what);
  // An Error for sqlite result code `rc` while doing `what` (uses the connection's message).
  Error error(int rc, std::string_view what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Stmt {
 public:
  static Result<Stmt> prepare(Db& db, std::string_view sql);

  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) = delete;
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Parameters are 1-based, like sqlite's.
  Stmt& bind(int index, std::string_view text);
  Stmt& bind(int index, std::int64_t value);
  Stmt& bind(int index, double value);
  Stmt& bind(int index, std::optional<double> value);
  Stmt& bind_null(int index);

  // true: a row is ready; false: done.
  Result<bool> step();
  // Steps to completion, ignoring rows.
  Status run();

  std::int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  bool is_null(int col) const;

 private:
  Stmt(Db& db, sqlite3_stmt* stmt) : db_(&db), stmt_(stmt) {}
  Db* db_;
  sqlite3_stmt* stmt_;
  std::string bind_error_;
};

// BEGIN IMMEDIATE … COMMIT; rolls back in the destructor unless committed.
// IMMEDIATE takes the write lock up front, so concurrent writers wait for each
// other (busy timeout) instead of failing when a read lock must be upgraded.
class Transaction {
 public:
  static Result<Transaction> begin(Db& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Db& db) : db_(&db) {}
  Db* db_;
};

}  // namespace memra::registry::sql
