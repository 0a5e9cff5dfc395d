// Loading models in the real memra-host: the embedded default model (and the
// examples it prints, run as printed), the registry gate (supported, generic,
// --allow-generic, rejected), several models at once, and the context knob.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "error_shape.hpp"
#include "host_process.hpp"
#include "http_client.hpp"
#include "registry_seed.hpp"

namespace memra::server::testing {
namespace {

const std::filesystem::path kDefaultModel = std::filesystem::path(MEMRA_BINARY_ROOT) / "share/memra/default_model";

// A registry at `db` whose verdict for the default model's combo (llama, bf16, cpu) is `verdict`.
void seed_registry(const std::filesystem::path& db, registry::Verdict verdict) {
  seed_verdict(db, {"llama", "bf16", "", "cpu"}, verdict, "set by tests/server/process_model_test.cpp");
}

std::string chat_body(const std::string& model, int max_tokens) {
  return R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hello"}],"max_tokens":)" +
         std::to_string(max_tokens) + "}";
}

std::string run_shell(const std::string& script) {
  FILE* pipe = popen(script.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  return out;
}

TEST(ServerModels, DefaultModelServesAndItsCurlExampleWorksAsPrinted) {
  std::string why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  const std::string printed = host->read_stdout(500);
  const std::string url = "http://127.0.0.1:" + std::to_string(host->port());
  EXPECT_NE(printed.find("curl -s " + url + "/v1/chat/completions"), std::string::npos) << printed;
  EXPECT_NE(printed.find("new OpenAI({ baseURL: \"" + url + "/v1\""), std::string::npos) << printed;

  // Paste the curl lines into a shell, as a reader would.
  const auto begin = printed.find("  curl -s ");
  ASSERT_NE(begin, std::string::npos);
  const auto end = printed.find('\n', printed.find("    -d ", begin));
  const std::string command = printed.substr(begin, end - begin);
  if (!std::filesystem::exists("/usr/bin/curl")) GTEST_SKIP() << "curl not installed; the printed command was:\n" << command;
  const std::string answer = run_shell(command);
  auto doc = nlohmann::json::parse(answer, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << command << "\n->\n" << answer;
  EXPECT_EQ(doc["object"], "chat.completion") << answer;
  EXPECT_EQ(doc["model"], "memra-tiny-random");
  // The example asks for 16 tokens; unseeded sampling may end early at the end-of-text token.
  EXPECT_GE(doc["usage"]["completion_tokens"].get<int>(), 1) << answer;
  EXPECT_LE(doc["usage"]["completion_tokens"].get<int>(), 16) << answer;
}

TEST(ServerModels, RegistryGate) {
  TempDir dir;
  const auto db = dir.path() / "registry.db";
  const std::string model = "--model=tiny=" + kDefaultModel.string();

  seed_registry(db, registry::Verdict::rejected);
  auto r = run_host({"--port", "0", "--registry", db.string(), model, "--allow-generic"});
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("refusing model 'tiny'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(family llama, quant bf16, no drafter, arch cpu) as rejected"), std::string::npos) << r.err;

  seed_registry(db, registry::Verdict::generic);
  r = run_host({"--port", "0", "--registry", db.string(), model});
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("is not verified (registry verdict generic). Pass --allow-generic"), std::string::npos) << r.err;

  std::string why;
  auto host = HostProcess::start({"--registry", db.string(), model, "--allow-generic"}, {}, &why);
  ASSERT_TRUE(host) << why;
  EXPECT_EQ(http(host->port(), post("/v1/chat/completions", chat_body("tiny", 2))).status, 200);
  EXPECT_NE(host->log().find("UNVERIFIED: model 'tiny'"), std::string::npos) << host->log();

  seed_registry(db, registry::Verdict::supported);
  host = HostProcess::start({"--registry", db.string(), model}, {}, &why);
  ASSERT_TRUE(host) << why;
  EXPECT_NE(host->log().find("registry verdict supported for (family llama, quant bf16, no drafter, arch cpu)"),
            std::string::npos)
      << host->log();
  EXPECT_EQ(host->log().find("UNVERIFIED"), std::string::npos) << host->log();
}

// --chat-template replaces a model's template (per alias or for all); a broken file or
// an alias no model has stops the start with the reason.
TEST(ServerModels, ChatTemplateFlag) {
  TempDir dir;
  const auto tpl = dir.write("t.jinja", "X{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}Y");
  const auto broken = dir.write("broken.jinja", "{% for m in messages %}never closed");
  std::string why;
  auto host = HostProcess::start({"--model", "a=" + kDefaultModel.string(), "--model", "b=" + kDefaultModel.string(),
                                  "--chat-template", "a=" + tpl.string()},
                                 {}, &why);
  ASSERT_TRUE(host) << why;
  // The rendered chat is exactly the template's text (its tokens: those of the text).
  const std::string chat = R"("messages":[{"role":"user","content":"hello"}])";
  auto want = http(host->port(), post("/tokenize", R"({"model":"a","prompt":"X[user:hello]Y","add_special_tokens":false})"));
  auto got = http(host->port(), post("/tokenize", "{\"model\":\"a\"," + chat + "}"));
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(nlohmann::json::parse(got.body)["tokens"], nlohmann::json::parse(want.body)["tokens"]);
  auto other = http(host->port(), post("/tokenize", "{\"model\":\"b\"," + chat + "}"));
  EXPECT_NE(nlohmann::json::parse(other.body)["tokens"], nlohmann::json::parse(want.body)["tokens"]) << "b keeps its own";
  EXPECT_NE(host->log().find("chat template from " + tpl.string()), std::string::npos) << host->log();

  auto r = run_host({"--port", "0", "--model", "a=" + kDefaultModel.string(), "--chat-template", broken.string()});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find(broken.string() + " is not a usable chat template"), std::string::npos) << r.err;
  r = run_host({"--port", "0", "--model", "a=" + kDefaultModel.string(), "--chat-template", (dir.path() / "none.jinja").string()});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("cannot be read"), std::string::npos) << r.err;
  r = run_host({"--port", "0", "--model", "a=" + kDefaultModel.string(), "--chat-template", "zz=" + tpl.string()});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("names no served model"), std::string::npos) << r.err;
  r = run_host({"--port", "0", "--chat-template", tpl.string(), "--chat-template", tpl.string()});
  EXPECT_EQ(r.exit_code, 64) << r.err;
}

TEST(ServerModels, SeveralModelsByAliasAndTheContextKnob) {
  std::string why;
  auto host = HostProcess::start({"--model", "a=" + kDefaultModel.string(), "--max-context", "64"},
                                 {{"MEMRA_MODELS", "ignored=/nowhere"}}, &why);
  ASSERT_TRUE(host) << why;
  // --model replaced MEMRA_MODELS; a second model comes from a second flag only, so
  // check one, then start with the variable alone.
  auto models = nlohmann::json::parse(http(host->port(), get("/v1/models")).body);
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "a");
  EXPECT_EQ(models["data"][0]["max_model_len"], 64);
  // The prompt's size as the server counts it, then one token over the context and exactly up to it.
  auto tok = http(host->port(), post("/tokenize", R"({"model":"a","messages":[{"role":"user","content":"hello"}]})"));
  ASSERT_EQ(tok.status, 200) << tok.body;
  const int prompt = nlohmann::json::parse(tok.body)["count"];
  ASSERT_LT(prompt, 64);
  auto res = http(host->port(), post("/v1/chat/completions", chat_body("a", 64 - prompt + 1)));
  EXPECT_EQ(res.status, 400) << res.body;
  EXPECT_TRUE(is_openai_error(res.content_type, res.body, "context_length_exceeded", "max_tokens"));
  res = http(host->port(), post("/v1/chat/completions",
                                R"({"model":"a","messages":[{"role":"user","content":"hello"}],"max_tokens":)" +
                                    std::to_string(64 - prompt) + R"(,"ignore_eos":true})"));
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body)["usage"]["completion_tokens"], 64 - prompt);
  // Without max_tokens, generation is bounded by the context left.
  res = http(host->port(), post("/v1/chat/completions",
                                R"({"model":"a","messages":[{"role":"user","content":"hello"}],"ignore_eos":true})"));
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body)["usage"]["completion_tokens"], 64 - prompt);
  EXPECT_EQ(nlohmann::json::parse(res.body)["choices"][0]["finish_reason"], "length");

  host = HostProcess::start({}, {{"MEMRA_MODELS", "one=" + kDefaultModel.string() + ",two=" + kDefaultModel.string()}},
                            &why);
  ASSERT_TRUE(host) << why;
  models = nlohmann::json::parse(http(host->port(), get("/v1/models")).body);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][0]["id"], "one");
  EXPECT_EQ(models["data"][1]["id"], "two");
  EXPECT_EQ(host->read_stdout(200).find("curl"), std::string::npos) << "examples are for the default model only";
  for (const char* alias : {"one", "two"}) {
    res = http(host->port(), post("/v1/chat/completions", chat_body(alias, 2)));
    EXPECT_EQ(res.status, 200) << res.body;
    EXPECT_EQ(nlohmann::json::parse(res.body)["model"], alias);
  }
  EXPECT_EQ(nlohmann::json::parse(http(host->port(), get("/ready")).body)["models"],
            nlohmann::json::parse(R"(["one","two"])"));
}

}  // namespace
}  // namespace memra::server::testing
