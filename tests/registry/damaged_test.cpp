// Files that are not healthy memra registries give clear errors, never crashes,
// and are left as they were.
#include <random>

#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using test::raw_query;
using test::TempDir;

void expect_clean_error(const Result<Registry>& r, const std::filesystem::path& path, ErrorCode code,
                        const std::string& mentions) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(path.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(mentions), std::string::npos) << r.error().message;
  // Every message says what to do next.
  EXPECT_NE(r.error().message.find("--db"), std::string::npos) << r.error().message;
}

TEST(RegistryDamaged, RandomBytesAreNotADatabase) {
  TempDir dir;
  auto path = dir / "registry.db";
  std::mt19937 rng(1234);
  std::string bytes(64 * 1024, '\0');
  for (char& b : bytes) b = static_cast<char>(rng());
  test::write_file(path, bytes);
  expect_clean_error(Registry::open(path), path, ErrorCode::corrupt, "not an SQLite database");
  EXPECT_EQ(test::read_file(path), bytes);
}

TEST(RegistryDamaged, ATextFileIsNotADatabase) {
  TempDir dir;
  auto path = dir / "registry.db";
  test::write_file(path, "model: llama\nquant: q4_k\n");
  expect_clean_error(Registry::open(path), path, ErrorCode::corrupt, "not an SQLite database");
}

TEST(RegistryDamaged, ForeignSqliteDatabaseIsRefusedAndUntouched) {
  TempDir dir;
  auto path = dir / "other.db";
  test::raw_exec(path, "CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('x')");
  auto mode_before = raw_query(path, "PRAGMA journal_mode");
  expect_clean_error(Registry::open(path), path, ErrorCode::unsupported, "not a memra registry");
  EXPECT_EQ(raw_query(path, "SELECT name FROM sqlite_schema WHERE type='table'"), std::vector<std::string>{"users"});
  EXPECT_EQ(raw_query(path, "PRAGMA journal_mode"), mode_before);
}

TEST(RegistryDamaged, ForeignMetaTableIsRefused) {
  TempDir dir;
  auto path = dir / "other.db";
  test::raw_exec(path, "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES ('app','x')");
  expect_clean_error(Registry::open(path), path, ErrorCode::unsupported, "not a memra registry");
}

TEST(RegistryDamaged, TruncatedDatabaseIsReportedAsDamaged) {
  TempDir dir;
  auto path = dir / "registry.db";
  {
    auto reg = Registry::open(path);
    ASSERT_TRUE(reg.ok()) << reg.error().message;
    // Enough rows for several b-tree pages.
    for (int i = 0; i < 300; ++i) {
      auto info = test::sample_checkpoint((dir / ("m" + std::to_string(i))).string());
      info.parameters_json = R"({"pad":")" + std::string(200, 'x') + R"("})";
      ASSERT_TRUE(reg->record_checkpoint(info).ok());
    }
  }
  ASSERT_FALSE(std::filesystem::exists(dir / "registry.db-wal"));  // checkpointed on close
  auto size = std::filesystem::file_size(path);
  ASSERT_GT(size, 16u * 4096u);
  std::filesystem::resize_file(path, size / 2);
  expect_clean_error(Registry::open(path), path, ErrorCode::corrupt, "damaged");
}

TEST(RegistryDamaged, OverwrittenPagesAreReportedAsDamaged) {
  TempDir dir;
  auto path = dir / "registry.db";
  {
    auto reg = Registry::open(path);
    ASSERT_TRUE(reg.ok()) << reg.error().message;
    for (int i = 0; i < 300; ++i)
      ASSERT_TRUE(reg->record_checkpoint(test::sample_checkpoint((dir / ("m" + std::to_string(i))).string())).ok());
  }
  // Scribble over everything after the first page (the header stays valid).
  std::string bytes = test::read_file(path);
  ASSERT_GT(bytes.size(), 8192u);
  std::mt19937 rng(99);
  for (std::size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(rng());
  test::write_file(path, bytes);
  auto r = Registry::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::corrupt) << r.error().message;
  EXPECT_NE(r.error().message.find(path.string()), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace memra::registry
