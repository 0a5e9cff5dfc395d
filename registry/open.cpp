// Registry::open: file checks, connection settings, migrations, shipped combos.
#include <charconv>
#include <system_error>

#include <chrono>
#include <thread>

#include "registry/impl.hpp"
#include "registry/migrations.hpp"

namespace memra::registry {
namespace {

Result<std::string> query_text(sql::Db& db, const char* sql) {
  auto stmt = sql::Stmt::prepare(db, sql);
  if (!stmt.ok()) return stmt.error();
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  return *row ? stmt->text(0) : std::string();
}

// sqlite opens lazily, so a file of random bytes or a damaged one only shows
// itself when pages are read: read the schema, then let quick_check walk the
// b-trees (cheap at registry sizes).
Status check_health(sql::Db& db) {
  MEMRA_TRY(db.exec("SELECT count(*) FROM sqlite_schema", "reading the database schema"));
  auto stmt = sql::Stmt::prepare(db, "PRAGMA quick_check(5)");
  if (!stmt.ok()) return stmt.error();
  std::string problems;
  for (;;) {
    auto row = stmt->step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    std::string line = stmt->text(0);
    if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
  }
  if (problems.empty()) return {};
  return make_error(ErrorCode::corrupt,
                    "registry database '" + db.path() + "' is damaged (integrity check: " + problems +
                        "). Move it aside (sqlite3's '.recover' may salvage rows) and rerun to start a fresh "
                        "registry, or pass another path with --db / MEMRA_REGISTRY.");
}

Status configure(sql::Db& db) {
  // WAL lets readers run beside one writer; the mode is persistent, so only the
  // first opener of a new file switches it.
  auto mode = query_text(db, "PRAGMA journal_mode");
  if (!mode.ok()) return mode.error();
  if (*mode != "wal") {
    auto set = query_text(db, "PRAGMA journal_mode=WAL");
    if (!set.ok()) return set.error();
  }
  // NORMAL is durable across application crashes in WAL mode; foreign keys keep
  // repacks pointing at real checkpoints.
  return db.exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON", "configuring the connection");
}

Result<int> meta_int(Registry::Impl& impl, const char* key) {
  std::lock_guard lock(impl.mu);
  auto stmt = sql::Stmt::prepare(impl.db, "SELECT value FROM meta WHERE key = ?1");
  if (!stmt.ok()) return stmt.error();
  stmt->bind(1, std::string_view(key));
  auto row = stmt->step();
  if (!row.ok()) return row.error();
  if (!*row) return 0;
  std::string text = stmt->text(0);
  int value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

}  // namespace

Registry::Registry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Registry::Registry(Registry&&) noexcept = default;
Registry& Registry::operator=(Registry&&) noexcept = default;
Registry::~Registry() = default;

const std::filesystem::path& Registry::path() const { return impl_->path; }

Result<int> Registry::schema_version() const { return meta_int(*impl_, "schema_version"); }
Result<int> Registry::shipped_combos_version() const { return meta_int(*impl_, "shipped_combos_version"); }

Result<Registry> Registry::open(const std::filesystem::path& path, const OpenOptions& options) {
  if (path.empty())
    return make_error(ErrorCode::invalid_argument, "empty registry path; pass --db PATH or set MEMRA_REGISTRY");
  std::error_code ec;
  std::filesystem::path parent = path.parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return make_error(ErrorCode::io, "cannot create the directory '" + parent.string() + "' for registry '" +
                                           path.string() + "': " + ec.message() +
                                           ". Check its permissions, or pass another path with --db / "
                                           "MEMRA_REGISTRY.");
  }
  if (std::filesystem::is_directory(path, ec))
    return make_error(ErrorCode::invalid_argument,
                      "registry path '" + path.string() + "' is a directory; the registry is a file. Pass a file "
                      "path such as '" + (path / "registry.db").string() + "'.");

  auto db = sql::Db::open(path.string(), options.busy_timeout_ms);
  if (!db.ok()) return db.error();
  // While another process switches a brand-new file to WAL, SQLite can answer
  // SQLITE_BUSY without consulting the busy handler; retry these read-mostly steps
  // (never a write) until the busy timeout runs out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.busy_timeout_ms);
  Status prepared;
  while (true) {
    prepared = [&]() -> Status {
      MEMRA_TRY(check_health(*db));
      // Refuse foreign or newer databases before changing anything in them (even the journal mode).
      auto version = inspect_schema(*db);
      if (!version.ok()) return version.error();
      return configure(*db);
    }();
    if (prepared.ok() || prepared.error().message.find("database is locked") == std::string::npos ||
        std::chrono::steady_clock::now() > deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!prepared.ok()) return prepared.error();
  MEMRA_TRY(migrate(*db));

  auto impl = std::make_unique<Impl>();
  impl->db = std::move(*db);
  impl->path = path;
  Registry registry(std::move(impl));
  if (options.import_shipped) {
    auto report = registry.import_shipped(options.shipped_combos_json ? std::string_view(*options.shipped_combos_json)
                                                                      : shipped_combos_json());
    if (!report.ok()) return report.error();
  }
  return registry;
}

}  // namespace memra::registry
