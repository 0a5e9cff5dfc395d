// Discovery: --plugin-dir, then MEMRA_PLUGIN_PATH, then <exe_dir>/../lib/memra/plugins;
// earlier directories win a duplicate name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/plugin_host/plugin_host.hpp"
#include "tests/plugins/test_support.hpp"

namespace memra::plugins {
namespace {

namespace fs = std::filesystem;
using test::LogCapture;
using test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sets an environment variable for one test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void copy_plugin(std::string_view stem, const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(test::test_plugin(stem), dir / ("lib" + std::string(stem) + ".so"));
}

TEST(PluginsDiscovery, SearchOrderIsExplicitThenEnvThenInstallDir) {
  LogCapture log;
  ScopedEnv env("MEMRA_PLUGIN_PATH", "/env/one::/env/two:/explicit/a");
  PluginHostOptions o;
  o.plugin_dirs = {"/explicit/a", "/explicit/b"};
  o.exe_dir = "/opt/memra/bin";
  o.services.log = log.sink();
  PluginHost h(std::move(o));
  EXPECT_THAT(h.search_dirs(), ElementsAre(fs::path("/explicit/a"), fs::path("/explicit/b"), fs::path("/env/one"),
                                           fs::path("/env/two"), fs::path("/opt/memra/lib/memra/plugins")));
}

TEST(PluginsDiscovery, EnvAndInstallDirCanBeTurnedOff) {
  LogCapture log;
  ScopedEnv env("MEMRA_PLUGIN_PATH", "/env/one");
  PluginHost h(test::isolated_options(log, {"/explicit/a"}));
  EXPECT_THAT(h.search_dirs(), ElementsAre(fs::path("/explicit/a")));
}

TEST(PluginsDiscovery, DefaultInstallDirIsNextToTheExecutable) {
  LogCapture log;
  PluginHostOptions o = test::isolated_options(log, {});
  o.use_install_dir = true;
  PluginHost h(std::move(o));
  fs::path exe = fs::read_symlink("/proc/self/exe");
  EXPECT_THAT(h.search_dirs(), ElementsAre((exe.parent_path() / ".." / "lib/memra/plugins").lexically_normal()));
}

TEST(PluginsDiscovery, FindsPluginsThroughMemraPluginPath) {
  TempDir tmp;
  copy_plugin("memra-quant-good", tmp.path() / "p");
  LogCapture log;
  ScopedEnv env("MEMRA_PLUGIN_PATH", (tmp.path() / "missing").string() + ":" + (tmp.path() / "p").string());
  PluginHostOptions o = test::isolated_options(log, {});
  o.use_env_path = true;
  PluginHost h(std::move(o));
  EXPECT_EQ(h.discover(), 1u);
  ASSERT_EQ(h.plugins().size(), 1u);
  EXPECT_EQ(h.plugins()[0].name, "good-quant");
  EXPECT_TRUE(h.refusals().empty());
}

TEST(PluginsDiscovery, FindsPluginsInTheInstallLayout) {
  TempDir tmp;
  copy_plugin("memra-family-good", tmp.path() / "lib" / "memra" / "plugins");
  LogCapture log;
  PluginHostOptions o = test::isolated_options(log, {});
  o.use_install_dir = true;
  o.exe_dir = tmp.path() / "bin";
  PluginHost h(std::move(o));
  EXPECT_EQ(h.discover(), 1u);
  EXPECT_TRUE(h.family_for("GoodForCausalLM", h.device_info()).ok());
}

TEST(PluginsDiscovery, EarlierDirectoryWinsADuplicateName) {
  TempDir tmp;
  copy_plugin("memra-quant-good", tmp.path() / "first");
  copy_plugin("memra-quant-good", tmp.path() / "second");
  LogCapture log;
  PluginHost h(test::isolated_options(log, {tmp.path() / "first", tmp.path() / "second"}));
  EXPECT_EQ(h.discover(), 1u);
  ASSERT_EQ(h.plugins().size(), 1u);
  EXPECT_EQ(h.plugins()[0].file, tmp.path() / "first" / "libmemra-quant-good.so");
  ASSERT_EQ(h.refusals().size(), 1u);
  EXPECT_EQ(h.refusals()[0].file, tmp.path() / "second" / "libmemra-quant-good.so");
  EXPECT_EQ(h.refusals()[0].reason, "duplicate plugin name 'good-quant' (already registered from " +
                                        (tmp.path() / "first" / "libmemra-quant-good.so").string() +
                                        "; earlier search directories take precedence)");
}

TEST(PluginsDiscovery, MissingExplicitDirectoryIsReported) {
  LogCapture log;
  PluginHost h(test::isolated_options(log, {"/nonexistent/memra-plugins"}));
  EXPECT_EQ(h.discover(), 0u);
  EXPECT_EQ(log.containing("plugin directory /nonexistent/memra-plugins (from --plugin-dir) does not exist").size(),
            1u);
}

}  // namespace
}  // namespace memra::plugins
