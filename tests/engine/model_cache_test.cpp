// First-load repacks: the first load writes a .memra repack and records it in the
// registry, a later load reuses it, a changed source is repacked again, and the
// repack serves the same logits as the source.
#include <gtest/gtest.h>

#include <filesystem>
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

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

  // A source modified after the repack is repacked again; the same bytes give the same
  // content-named directory, and the old row goes.
  fs::last_write_time(dir / "src/model.safetensors", fs::file_time_type::clock::now() + std::chrono::hours(1));
  auto third = memra::engine::prepare_model((dir / "src").string(), o);
  ASSERT_TRUE(third.ok()) << third.error().message;
  EXPECT_TRUE(third->repacked);
  EXPECT_EQ(third->path, first->path);
  EXPECT_EQ(reg->list_repacks()->size(), 1u);
  // Different bytes, a different name (and the stale repack is removed).
  {
    std::fstream f(dir / "src/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.write("\x01\x02", 2);
  }
  auto fourth = memra::engine::prepare_model((dir / "src").string(), o);
  ASSERT_TRUE(fourth.ok()) << fourth.error().message;
  EXPECT_TRUE(fourth->repacked);
  EXPECT_NE(fourth->path, first->path);
  EXPECT_FALSE(fs::exists(first->path)) << "the stale repack stayed";
  EXPECT_EQ(reg->list_repacks()->size(), 1u);
}

namespace {

struct Cache {
  memra::testing::TempDir tmp;
  const fs::path& dir = tmp.path();
  memra::engine::ModelCacheOptions options;
  std::vector<std::string> lines;
  explicit Cache(const std::string& name) : tmp("memra-model-cache-" + name) {
    options.plugins = &memra::testing::build_plugins();
    options.registry_path = dir / "registry.db";
    options.cache_dir = dir / "repacks";
    options.log = [this](const std::string& l) { lines.push_back(l); };
  }
  bool logged(const std::string& text) const {
    for (const auto& l : lines)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// Every regular file of a .memra directory, by name, with its bytes.
std::map<std::string, std::vector<char>> files_of(const fs::path& dir) {
  std::map<std::string, std::vector<char>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = bytes_of(e.path());
  return out;
}

}  // namespace

// A cached repack damaged after it was recorded — bytes flipped in a blob (same size),
// a truncated blob, a manifest that is not the recorded one — is found on reuse,
// removed with its registry row, and made again, identical to the first.
TEST(EngineModelCache, ADamagedRepackIsRemovedAndMadeAgain) {
  const fs::path fixture = memra::testing::fixture("models/llama");
  if (!fs::exists(fixture)) GTEST_SKIP() << "fixtures absent";
  Cache c("damaged");
  auto first = memra::engine::prepare_model(fixture.string(), c.options);
  ASSERT_TRUE(first.ok()) << first.error().message;
  const auto original = files_of(first->path);
  const fs::path blob = fs::path(first->path) / "weights-00000.bin";
  const std::vector<std::pair<std::string, std::function<void()>>> damage = {
      {"flipped bytes", [&] {
         fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
         std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(100000);
         f.write("\xde\xad\xbe\xef", 4);
       }},
      {"truncated blob", [&] { fs::resize_file(blob, fs::file_size(blob) / 2); }},
      {"another manifest", [&] {
         const fs::path m = fs::path(first->path) / "manifest.json";
         std::ofstream(m, std::ios::app) << " ";
       }},
  };
  for (const auto& [what, apply] : damage) {
    SCOPED_TRACE(what);
    apply();
    c.lines.clear();
    auto again = memra::engine::prepare_model(fixture.string(), c.options);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_TRUE(again->repacked) << "the damaged repack was reused";
    EXPECT_TRUE(c.logged("the repack is damaged: " + first->path)) << ::testing::PrintToString(c.lines);
    EXPECT_EQ(again->path, first->path);  // the same content, the same name
    EXPECT_EQ(files_of(again->path).size(), original.size());
    for (const auto& [name, bytes] : files_of(again->path))
      if (name != "manifest.json") {
        EXPECT_EQ(bytes, original.at(name)) << name;
      }
    auto reg = memra::registry::Registry::open(c.options.registry_path);
    ASSERT_TRUE(reg.ok());
    EXPECT_EQ(reg->list_repacks()->size(), 1u) << "the damaged repack's row stayed";
    auto reused = memra::engine::prepare_model(fixture.string(), c.options);
    ASSERT_TRUE(reused.ok());
    EXPECT_TRUE(reused->reused);
  }
}

// Temporary directories of repacks that were killed (kill -9: their lock is free) are
// removed at the next start, whatever repack they were for.
TEST(EngineModelCache, TemporaryDirectoriesOfKilledRepacksAreRemovedAtStart) {
  const fs::path fixture = memra::testing::fixture("models/llama");
  if (!fs::exists(fixture)) GTEST_SKIP() << "fixtures absent";
  Cache c("stale");
  for (const char* name : {".llama-0123456789abcdef.memra.tmp-999999999-00000001", ".other.memra.tmp-999999998-00000002"}) {
    fs::create_directories(c.options.cache_dir / name);
    std::ofstream(c.options.cache_dir / name / "weights-00000.bin") << std::string(100000, 'x');
    std::ofstream(c.options.cache_dir / name / ".writer.lock");
  }
  auto first = memra::engine::prepare_model(fixture.string(), c.options);
  ASSERT_TRUE(first.ok()) << first.error().message;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(c.options.cache_dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{".locks", fs::path(first->path).filename().string()}));
  EXPECT_TRUE(c.logged("removed 2 temporary directories")) << ::testing::PrintToString(c.lines);
}

// Three loads of one source at once (separate lock descriptors, as separate processes
// have) make one repack: one writes it, the others wait for the lock and reuse it.
TEST(EngineModelCache, ConcurrentFirstLoadsShareOneRepack) {
  const fs::path fixture = memra::testing::fixture("models/llama");
  if (!fs::exists(fixture)) GTEST_SKIP() << "fixtures absent";
  Cache c("concurrent");
  std::vector<memra::Result<memra::engine::PreparedModel>> results(3, memra::make_error(memra::ErrorCode::internal, ""));
  std::vector<std::thread> loads;
  for (int i = 0; i < 3; ++i)
    loads.emplace_back([&, i] {
      auto o = c.options;
      o.log = {};
      results[static_cast<size_t>(i)] = memra::engine::prepare_model(fixture.string(), o);
    });
  for (auto& t : loads) t.join();
  int repacked = 0, reused = 0;
  for (auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error().message;
    repacked += r->repacked;
    reused += r->reused;
    EXPECT_EQ(r->path, results[0]->path);
  }
  EXPECT_EQ(repacked, 1);
  EXPECT_EQ(reused, 2);
  auto reg = memra::registry::Registry::open(c.options.registry_path);
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(reg->list_repacks()->size(), 1u);
  int dirs = 0;
  for (const auto& e : fs::directory_iterator(c.options.cache_dir)) dirs += e.path().extension() == ".memra";
  EXPECT_EQ(dirs, 1);
}
