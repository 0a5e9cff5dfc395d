// First-load repacks: the first load writes a .memra repack and records it in the
// registry, a later load reuses it, a changed source is repacked again, and the
// repack serves the same logits as the source.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "host/engine/engine.hpp"
#include "host/engine/model_cache.hpp"
#include "registry/registry.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

TEST(EngineModelCache, RepackOnceThenReuseUntilTheSourceChanges) {
  const fs::path fixture = memra::testing::fixture("models/llama");
  if (!fs::exists(fixture)) GTEST_SKIP() << "fixtures absent";
  const memra::testing::TempDir tmp("memra-model-cache");
  const fs::path& dir = tmp.path();
  fs::create_directories(dir / "src");
  for (const auto& f : fs::directory_iterator(fixture)) fs::copy(f.path(), dir / "src" / f.path().filename());
  for (const auto& f : fs::directory_iterator(dir / "src")) fs::permissions(f.path(), fs::perms::owner_write, fs::perm_options::add);

  memra::engine::ModelCacheOptions o;
  o.plugins = &memra::testing::build_plugins();
  o.registry_path = dir / "registry.db";
  o.cache_dir = dir / "repacks";
  auto first = memra::engine::prepare_model((dir / "src").string(), o);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_TRUE(first->repacked);
  EXPECT_TRUE(fs::exists(fs::path(first->path) / "manifest.json"));

  auto reg = memra::registry::Registry::open(o.registry_path);
  ASSERT_TRUE(reg.ok());
  auto ck = reg->find_checkpoint((dir / "src").string());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->family, "llama");
  auto repacks = reg->list_repacks(ck->id);
  ASSERT_TRUE(repacks.ok());
  ASSERT_EQ(repacks->size(), 1u);
  EXPECT_EQ(fs::path((*repacks)[0].output_path), fs::path(first->path));

  auto second = memra::engine::prepare_model((dir / "src").string(), o);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_TRUE(second->reused);
  EXPECT_EQ(second->path, first->path);

  // A .memra directory is served as it is.
  auto direct = memra::engine::prepare_model(first->path, o);
  ASSERT_TRUE(direct.ok());
  EXPECT_FALSE(direct->repacked || direct->reused);

  // A source modified after the repack is repacked again.
  fs::last_write_time(dir / "src/model.safetensors", fs::file_time_type::clock::now() + std::chrono::hours(1));
  auto third = memra::engine::prepare_model((dir / "src").string(), o);
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_TRUE(third->repacked);
  EXPECT_NE(third->path, first->path);
}
