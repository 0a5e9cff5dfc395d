// memra-registry prune against repacks made by the real memra-repack: rows whose repack
// is gone, replaced, or made from a source that changed are removed (with their
// directories inside the repack cache only), so are checkpoints left without repacks,
// temporary directories of killed repacks and unrecorded repacks in the cache; a repack
// that still matches stays; --dry-run changes nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"
#include "tests/support/fixtures.hpp"

namespace memra::registry {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;

const fs::path kFixture = memra::testing::fixture("models/llama");

fs::path copy_source(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& f : fs::directory_iterator(kFixture)) {
    fs::copy(f.path(), to / f.path().filename());
    fs::permissions(to / f.path().filename(), fs::perms::owner_write, fs::perm_options::add);
  }
  return to;
}

void repack(const fs::path& source, const fs::path& out, const fs::path& db) {
  const std::string cmd = std::string(MEMRA_REPACK_BINARY) + " '" + source.string() + "' -o '" + out.string() +
                          "' --registry '" + db.string() + "' --quiet >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RegistryPrune, RemovesWhatNoLongerMatchesAndKeepsTheRest) {
  if (!fs::exists(kFixture)) GTEST_SKIP() << "fixtures absent";
  TempDir dir;
  const fs::path db = dir / "registry.db";
  const fs::path cache = dir / "home" / "repacks";
  fs::create_directories(cache);
  const fs::path kept = copy_source(dir / "kept"), changed = copy_source(dir / "changed"),
                 gone = copy_source(dir / "gone"), replaced = copy_source(dir / "replaced"),
                 elsewhere = copy_source(dir / "elsewhere");
  repack(kept, cache / "kept.memra", db);
  repack(changed, cache / "changed.memra", db);
  repack(gone, cache / "gone.memra", db);
  repack(replaced, cache / "replaced.memra", db);
  fs::create_directories(dir / "user");
  repack(elsewhere, dir / "user" / "mine.memra", db);  // a user's repack, outside the cache
  if (HasFatalFailure()) return;
  // What goes wrong after the fact:
  fs::last_write_time(changed / "model.safetensors", fs::file_time_type::clock::now() + std::chrono::hours(1));
  fs::remove_all(cache / "gone.memra");
  std::ofstream(cache / "replaced.memra" / "manifest.json", std::ios::app) << "\n";
  fs::remove_all(elsewhere);                           // its source went away
  fs::create_directories(cache / "orphan.memra");      // no row names it (a copy of one)
  fs::copy(cache / "kept.memra", cache / "orphan.memra", fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::create_directories(cache / ".x.memra.tmp-999999999-00000001");  // a killed repack's
  std::ofstream(cache / ".x.memra.tmp-999999999-00000001" / "weights-00000.bin") << std::string(1000, 'x');
  const auto before = names_in(cache);

  const std::vector<std::string> env_args = {"--db", db.string(), "prune", "--repacks", cache.string()};
  auto dry = run_cli({"--db", db.string(), "prune", "--repacks", cache.string(), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would prune 4 repack row(s), 4 checkpoint row(s) and 4 directories"), std::string::npos) << dry.out;
  EXPECT_EQ(names_in(cache), before) << "--dry-run removed something";
  {
    auto reg = Registry::open(db);
    ASSERT_TRUE(reg.ok());
    EXPECT_EQ(reg->list_repacks()->size(), 5u);
  }

  auto r = run_cli({"--db", db.string(), "prune", "--repacks", cache.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* why : {"(" , "its source no longer matches", "its directory is gone",
                          "its manifest.json is not the one recorded", "no repack of it is left",
                          "no registry row names it", "a repack that was killed"})
    EXPECT_NE(r.out.find(why), std::string::npos) << "'" << why << "' not in:\n" << r.out;
  EXPECT_EQ(names_in(cache), (std::vector<std::string>{"kept.memra"})) << r.out;
  EXPECT_TRUE(fs::exists(dir / "user" / "mine.memra")) << "prune removed a directory outside the repack cache";
  auto reg = Registry::open(db);
  ASSERT_TRUE(reg.ok());
  const auto repacks = *reg->list_repacks();
  ASSERT_EQ(repacks.size(), 1u);
  EXPECT_EQ(fs::path(repacks[0].output_path), cache / "kept.memra");
  ASSERT_EQ(reg->list_checkpoints()->size(), 1u);
  EXPECT_EQ(fs::path((*reg->list_checkpoints())[0].source_path), kept);
  // Nothing more to do the second time.
  r = run_cli({"--db", db.string(), "prune", "--repacks", cache.string()});
  EXPECT_NE(r.out.find("pruned 0 repack row(s), 0 checkpoint row(s) and 0 directories"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace memra::registry
