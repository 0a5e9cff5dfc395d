// The real `openai` npm client against a real memra-host serving the random test
// model (memra-tiny-random): starts the host, runs `node openai_client.mjs <baseURL> ...`,
// asserts exit 0 and shows the script's output. Also runs the openai-client example
// that memra-host prints at start, exactly as printed, against the embedded default
// model (memra-demo), and checks it answers in English words.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "host/server/api_keys.hpp"
#include "serving_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

namespace fs = std::filesystem;

// stdout and stderr together.
::memra::testing::CommandResult run_shell(const std::string& command) {
  return ::memra::testing::run_command(command, ::memra::testing::Stderr::merge);
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

// Skips unless node and the openai package are installed (scripts/setup does both).
bool have_node(std::string* why) {
  if (run_shell("node --version").exit_code != 0) {
    *why = "node is not installed (scripts/setup installs it)";
    return false;
  }
  if (!fs::exists(fs::path(MEMRA_NODE_DIR) / "node_modules/openai/index.mjs")) {
    *why = std::string("the openai package is not installed in ") + MEMRA_NODE_DIR + " (run scripts/setup)";
    return false;
  }
  return true;
}

TEST(ServingOpenai, TheOpenaiClientWorksAgainstMemraHost) {
  std::string why;
  if (!have_node(&why)) GTEST_SKIP() << why;
  TempDir dir;
  const std::string good = "sk-good-1", disabled = "sk-disabled-2", tight = "sk-tight-3";
  const auto keys = dir.write("keys.json", R"({"keys":[
    {"sha256":")" + sha256_hex(good) + R"(","tenant":"acme"},
    {"sha256":")" + sha256_hex(disabled) + R"(","tenant":"gone","disabled":true},
    {"sha256":")" + sha256_hex(tight) + R"(","tenant":"tight","limits":{"max_concurrent":1,"queue_timeout_ms":0}}]})");
  auto host = HostProcess::start(with_tiny_random_model({"--api-keys", keys.string()}), {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string base = "http://127.0.0.1:" + std::to_string(host->port()) + "/v1";
  const std::string script = std::string(MEMRA_SOURCE_ROOT) + "/tests/serving/openai_client.mjs";
  const auto r = run_shell("MEMRA_NODE_DIR=" + quote(MEMRA_NODE_DIR) + " timeout 120 node " + quote(script) + " " +
                          quote(base) + " " + quote(good) + " " + quote(disabled) + " " + quote(tight));
  EXPECT_EQ(r.exit_code, 0) << r.out << "\nmemra-host log:\n" << host->log();
  // node:test prints "# pass N" / "# fail N"; every test must have run.
  EXPECT_NE(r.out.find("# pass 12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# fail 0"), std::string::npos) << r.out;
  std::cout << r.out.substr(r.out.find("# tests") == std::string::npos ? 0 : r.out.find("# tests"));
}

TEST(ServingOpenai, ThePrintedClientExampleRunsAsPrinted) {
  std::string why;
  if (!have_node(&why)) GTEST_SKIP() << why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string printed = host->read_stdout(500);
  const auto begin = printed.find("  import OpenAI");
  const auto end = printed.find("console.log(r.choices[0].message.content);");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos) << printed;
  const std::string snippet = printed.substr(begin, end - begin) + "console.log(r.choices[0].message.content);\n";
  // Where `import "openai"` resolves: a node_modules next to the file.
  TempDir dir;
  fs::create_directory_symlink(fs::path(MEMRA_NODE_DIR) / "node_modules", dir.path() / "node_modules");
  const auto file = dir.write("example.mjs", snippet);
  const auto r = run_shell("timeout 60 node " + quote(file.string()));
  EXPECT_EQ(r.exit_code, 0) << snippet << "\n->\n" << r.out << "\nlog:\n" << host->log();
  EXPECT_FALSE(r.out.empty());
}

}  // namespace
}  // namespace memra::server::testing
