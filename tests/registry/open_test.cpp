// Opening: migrations from an empty file, reopening, versions, default paths.
#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using test::raw_query;
using test::TempDir;

using test::sample_checkpoint;

TEST(RegistryOpen, MigratesFromEmptyAndCreatesParentDirectory) {
  TempDir dir;
  auto path = dir / "nested/deeper/registry.db";
  {
    auto reg = Registry::open(path);
    ASSERT_TRUE(reg.ok()) << reg.error().message;
    auto version = reg->schema_version();
    ASSERT_TRUE(version.ok()) << version.error().message;
    EXPECT_EQ(*version, kSchemaVersion);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  // Inspect the file itself, not through the API.
  auto tables = raw_query(path, "SELECT name FROM sqlite_schema WHERE type='table' ORDER BY name");
  EXPECT_EQ(tables, (std::vector<std::string>{"checkpoints", "combos", "meta", "repacks"}));
  EXPECT_EQ(raw_query(path, "PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  EXPECT_EQ(raw_query(path, "SELECT value FROM meta WHERE key='app'"), std::vector<std::string>{"memra-registry"});
  EXPECT_EQ(raw_query(path, "SELECT value FROM meta WHERE key='schema_version'"),
            std::vector<std::string>{std::to_string(kSchemaVersion)});
  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
}

TEST(RegistryOpen, EmptyExistingFileIsANewRegistry) {
  TempDir dir;
  auto path = dir / "registry.db";
  test::write_file(path, "");
  auto reg = Registry::open(path);
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  EXPECT_EQ(*reg->schema_version(), kSchemaVersion);
}

TEST(RegistryOpen, ReopenKeepsRows) {
  TempDir dir;
  auto path = dir / "registry.db";
  std::int64_t ck_id = 0;
  {
    auto reg = Registry::open(path);
    ASSERT_TRUE(reg.ok()) << reg.error().message;
    auto ck = reg->record_checkpoint(sample_checkpoint((dir / "model").string()));
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    ck_id = ck->id;
    auto rp = reg->record_repack({ck_id, (dir / "model.memra").string(), "beef", "memra-repack 0.1.0", "{}"});
    ASSERT_TRUE(rp.ok()) << rp.error().message;
    GateRecord g;
    g.key = {"llama", "q4_k", "", "cpu"};
    g.gate = "oracle-logits";
    g.pass = true;
    ASSERT_TRUE(reg->record_gate(g).ok());
  }
  auto reg = Registry::open(path);
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  auto cks = reg->list_checkpoints();
  ASSERT_TRUE(cks.ok());
  ASSERT_EQ(cks->size(), 1u);
  EXPECT_EQ((*cks)[0].id, ck_id);
  EXPECT_EQ((*cks)[0].sha256, std::string(64, 'a'));
  EXPECT_EQ((*cks)[0].size_bytes, 123456789u);
  auto rps = reg->list_repacks();
  ASSERT_TRUE(rps.ok());
  ASSERT_EQ(rps->size(), 1u);
  EXPECT_EQ((*rps)[0].checkpoint_id, ck_id);
  auto combo = reg->find_combo({"llama", "q4_k", "", "cpu"});
  ASSERT_TRUE(combo.ok());
  ASSERT_TRUE(combo->has_value());
  EXPECT_EQ((**combo).source, "gate");
}

TEST(RegistryOpen, RefusesADatabaseNewerThanTheCode) {
  TempDir dir;
  auto path = dir / "registry.db";
  { ASSERT_TRUE(Registry::open(path).ok()); }
  test::raw_exec(path, "UPDATE meta SET value='" + std::to_string(kSchemaVersion + 7) +
                           "' WHERE key='schema_version'");
  auto reg = Registry::open(path);
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.error().code, ErrorCode::unsupported);
  EXPECT_NE(reg.error().message.find(path.string()), std::string::npos) << reg.error().message;
  EXPECT_NE(reg.error().message.find("newer"), std::string::npos) << reg.error().message;
  EXPECT_NE(reg.error().message.find("upgrade memra"), std::string::npos) << reg.error().message;
  // Refusing must not touch the file.
  EXPECT_EQ(raw_query(path, "SELECT value FROM meta WHERE key='schema_version'"),
            std::vector<std::string>{std::to_string(kSchemaVersion + 7)});
}

TEST(RegistryOpen, RefusesADirectory) {
  TempDir dir;
  auto reg = Registry::open(dir.path());
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(reg.error().message.find("is a directory"), std::string::npos) << reg.error().message;
}

TEST(RegistryOpen, DefaultPathFollowsTheEnvironment) {
  test::ScopedEnv reg_env("MEMRA_REGISTRY", std::nullopt);
  test::ScopedEnv home_env("MEMRA_HOME", std::nullopt);
  test::ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_path()->string(), "/home/someone/.memra/registry.db");
  EXPECT_EQ(memra_home()->string(), "/home/someone/.memra");
  {
    test::ScopedEnv h("MEMRA_HOME", "/srv/memra");
    EXPECT_EQ(default_path()->string(), "/srv/memra/registry.db");
    test::ScopedEnv r("MEMRA_REGISTRY", "/data/other.db");
    EXPECT_EQ(default_path()->string(), "/data/other.db");
  }
  {
    test::ScopedEnv no_home("HOME", std::nullopt);
    auto p = default_path();
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.error().message.find("MEMRA_HOME"), std::string::npos);
  }
}

}  // namespace
}  // namespace memra::registry
