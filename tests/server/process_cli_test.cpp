// memra-host's command line: --help, --hash-key, --port 0, refusals and start-up errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "host/server/api_keys.hpp"
#include "host_process.hpp"
#include "http_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

// (Every flag and variable of --help against docs/FLAGS.md: tests/docs/flags_doc_test.cpp.)
TEST(ServerCli, HelpExitsZeroAndStopsOptionProcessing) {
  auto r = run_host({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--port"), std::string::npos) << r.out;
  EXPECT_EQ(run_host({"-h"}).exit_code, 0);
  EXPECT_EQ(run_host({"--help", "--no-such-flag"}).exit_code, 0);  // help stops option processing
}

TEST(ServerCli, VersionPrintsAndExits) {
  auto r = run_host({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("memra-host ", 0), 0u) << r.out;
}

using memra::testing::coreutils_sha256;  // an independent oracle

TEST(ServerCli, HashKeyPrintsTheSha256) {
  const std::string key = "sk-live-AbC123";
  auto oracle = coreutils_sha256(key);
  if (!oracle) GTEST_SKIP() << "sha256sum (coreutils) not available as an oracle";
  auto r = run_host({"--hash-key", key});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, *oracle + "\n");
  r = run_host({"--hash-key", "-"}, {}, key + "\n");  // from stdin, trailing newline dropped
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, *oracle + "\n");
  r = run_host({"--hash-key", ""});
  EXPECT_EQ(r.exit_code, 64);
}

TEST(ServerCli, PortZeroPrintsTheListeningLine) {
  std::string why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  EXPECT_GT(host->port(), 0);
  EXPECT_NE(host->port(), 8080);
  EXPECT_EQ(host->listening_line(), "memra-host listening on http://127.0.0.1:" + std::to_string(host->port()));
  EXPECT_EQ(http(host->port(), get("/health")).status, 200);
}

TEST(ServerCli, EnvironmentSetsTheListenAddress) {
  // MEMRA_PORT=0 and MEMRA_HOST without flags (run_host adds none).
  TempDir dir;
  auto r = run_host({"--model", "x=/nonexistent"}, {{"MEMRA_PORT", "0"}, {"MEMRA_HOST", "127.0.0.1"}});
  EXPECT_EQ(r.exit_code, 66) << r.err;  // got as far as the model: the env values were valid
  r = run_host({}, {{"MEMRA_PORT", "http"}});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("MEMRA_PORT"), std::string::npos) << r.err;
}

TEST(ServerCli, AModelThatCannotLoadStopsTheStartNamingIt) {
  TempDir dir;
  for (const auto& [args, env] : std::vector<std::pair<std::vector<std::string>, EnvVars>>{
           {{"--port", "0", "--model", "tiny=/models/tiny.memra"}, {}},
           {{"--port", "0"}, {{"MEMRA_MODELS", "tiny=/models/tiny.memra"}}}}) {
    auto r = run_host(args, env);
    EXPECT_EQ(r.exit_code, 66) << r.err;
    EXPECT_NE(r.err.find("cannot load model 'tiny' (/models/tiny.memra)"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << "must not serve: " << r.out;
  }
  // A directory that is not a model.
  auto r = run_host({"--port", "0", "--model", "empty=" + dir.path().string()});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("cannot load model 'empty'"), std::string::npos) << r.err;
}

TEST(ServerCli, CudaBackendIsRefusedClearly) {
  auto r = run_host({"--port", "0", "--backend", "cuda"});
  EXPECT_EQ(r.exit_code, 69) << r.err;
  // No driver on this machine (CI): refused with the reason.
  EXPECT_NE(r.err.find("the CUDA backend is not available here ("),
            std::string::npos)
      << r.err;
  EXPECT_EQ(run_host({"--backend", "tpu"}).exit_code, 64);
}

TEST(ServerCli, UsageErrorsExit64) {
  auto r = run_host({"--no-such-flag"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("--help"), std::string::npos) << r.err;
  r = run_host({"--port"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  r = run_host({"--port", "99999"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("--port"), std::string::npos) << r.err;
  r = run_host({"model.gguf"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("unexpected argument 'model.gguf'"), std::string::npos) << r.err;
}

TEST(ServerCli, BadKeyFileIsAStartupErrorNamingTheEntry) {
  TempDir dir;
  const auto file = dir.write("keys.json", R"({"keys":[{"sha256":")" + sha256_hex("a") +
                                               R"(","tenant":"acme"},{"sha256":"nothex","tenant":"beta"}]})");
  auto r = run_host({"--port", "0", "--api-keys", file.string()});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find("keys[1] (tenant \"beta\")"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
  r = run_host({"--port", "0"}, {{"MEMRA_API_KEYS", (dir.path() / "missing.json").string()}});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
}

TEST(ServerCli, PortInUseExits71) {
  std::string why;
  auto first = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(first) << why;
  auto r = run_host({"--host", "127.0.0.1", "--port", std::to_string(first->port())});
  EXPECT_EQ(r.exit_code, 71) << r.err;
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + std::to_string(first->port())), std::string::npos) << r.err;
}

}  // namespace
}  // namespace memra::server::testing

namespace memra::server::testing {
namespace {

TEST(ServerCli, OpensTheRegistryAndRefusesABadOne) {
  TempDir dir;
  const auto db = dir.path() / "reg" / "registry.db";
  // A good (new) registry is created and logged; run to a model that cannot load to stop early.
  auto r = run_host({"--port", "0", "--registry", db.string(), "--model", "m=/x"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_TRUE(std::filesystem::exists(db)) << r.err;
  EXPECT_NE(r.err.find("registry: " + db.string()), std::string::npos) << r.err;

  const auto bad = dir.write("bad.db", std::string(4096, 'x'));
  r = run_host({"--port", "0", "--registry", bad.string()});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_NE(r.err.find("registry: cannot open " + bad.string()), std::string::npos) << r.err;
  r = run_host({"--port", "0"}, {{"MEMRA_REGISTRY", bad.string()}});
  EXPECT_EQ(r.exit_code, 78) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

TEST(ServerCli, DefaultRegistryLivesInMemraHome) {
  TempDir dir;
  auto r = run_host({"--port", "0", "--model", "m=/x"}, {{"MEMRA_HOME", dir.path().string()}});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "registry.db")) << r.err;
}

TEST(ServerCli, ListPluginsReportsLoadedAndRefused) {
  TempDir dir;
  const auto plugins = dir.path() / "plugins";
  std::filesystem::create_directories(plugins);
  const auto bogus = plugins / "libmemra-family-bogus.so";
  {
    std::ofstream out(bogus);
    out << "not an ELF file";
  }
  auto r = run_host({"--list-plugins", "--plugin-dir", plugins.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("refused " + bogus.string() + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("plugin refused: " + bogus.string()), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  // Plugins staged in this build tree (<exe>/../lib/memra/plugins) each appear, loaded or refused.
  const std::filesystem::path staged = std::filesystem::path(MEMRA_HOST_BIN).parent_path() / ".." / "lib" / "memra" / "plugins";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(staged, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libmemra-", 0) != 0 || !name.ends_with(".so")) continue;
    EXPECT_NE(r.out.find(name), std::string::npos) << name << " missing from:\n" << r.out;
  }
}

}  // namespace
}  // namespace memra::server::testing
