// Loading models in the real memra-host: the embedded default model (and the
// examples it prints, run as printed), the registry gate (supported, generic,
// --allow-generic, rejected), several models at once, and the context knob.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "error_shape.hpp"
#include "host_process.hpp"
#include "http_client.hpp"
#include "registry_seed.hpp"
#include "tests/support/command.hpp"

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
  const std::string answer = memra::testing::run_command(command).out;
  auto doc = nlohmann::json::parse(answer, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << command << "\n->\n" << answer;
  EXPECT_EQ(doc["object"], "chat.completion") << answer;
  EXPECT_EQ(doc["model"], "memra-demo");
  // The example asks for 48 tokens; the model usually ends its answer before, at <|im_end|>.
  EXPECT_GE(doc["usage"]["completion_tokens"].get<int>(), 1) << answer;
  EXPECT_LE(doc["usage"]["completion_tokens"].get<int>(), 48) << answer;
  EXPECT_FALSE(doc["choices"][0]["message"]["content"].get<std::string>().empty()) << answer;
}

// The default model answers "Hello" greedily with the sentence transformers' greedy
// decoding of the same checkpoint gave (scripts/demo_model/train_results.json, "samples"):
// English, ended by the model itself at <|im_end|>.
TEST(ServerModels, TheDefaultModelAnswersInEnglishAsTransformersDoes) {
  const auto results = nlohmann::json::parse(
      std::ifstream(std::filesystem::path(MEMRA_SOURCE_ROOT) / "scripts/demo_model/train_results.json"));
  const auto& sample = results["samples"][0];
  ASSERT_EQ(sample["user"], "Hello");
  std::string want = sample["greedy"].get<std::string>();
  ASSERT_TRUE(want.ends_with("<|im_end|>")) << want;
  want.resize(want.size() - std::string("<|im_end|>").size());
  std::string why;
  auto host = HostProcess::start({}, {}, &why);
  ASSERT_TRUE(host) << why;
  const auto res = http(host->port(), post("/v1/chat/completions",
                                           R"({"model":"memra-demo","messages":[{"role":"user","content":"Hello"}],)"
                                           R"("max_tokens":48,"temperature":0})"));
  ASSERT_EQ(res.status, 200) << res.body;
  const auto doc = nlohmann::json::parse(res.body);
  EXPECT_EQ(doc["choices"][0]["message"]["content"], want) << res.body;
  EXPECT_EQ(doc["choices"][0]["finish_reason"], "stop") << res.body;
}

// A copy of the tiny random test model (tests/models/tiny-random: its shapes are what
// the damage below names) that a test may edit.
std::filesystem::path copy_tiny_random_model(const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  for (const auto& f : std::filesystem::directory_iterator(MEMRA_SOURCE_ROOT "/tests/models/tiny-random")) {
    std::filesystem::copy(f.path(), to / f.path().filename());
    std::filesystem::permissions(to / f.path().filename(), std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
  return to;
}

void edit_file(const std::filesystem::path& p, const std::function<void(std::string&)>& edit) {
  std::ifstream in(p, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  edit(text);
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

// Checkpoints valid on disk that cannot load — config and weights of different models,
// a broken tokenizer.json, a NaN weight — stop the start (exit 66) with an error naming
// the user's file, and nothing is repacked or recorded.
TEST(ServerModels, ACheckpointThatCannotLoadIsRefusedWithNothingRepackedOrRecorded) {
  struct Case {
    std::string name;
    std::function<void(const std::filesystem::path&)> damage;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"config of another model",
       [](const std::filesystem::path& d) {
         edit_file(d / "config.json", [](std::string& t) { const std::string from = "\"intermediate_size\": 512";
           t.replace(t.find(from), from.size(), "\"intermediate_size\": 256"); });
       },
       "model.safetensors has shape [512, 256], but "},
      {"broken tokenizer.json",
       [](const std::filesystem::path& d) { std::filesystem::resize_file(d / "tokenizer.json", 500); }, "tokenizer.json"},
      {"a NaN weight",
       [](const std::filesystem::path& d) {
         edit_file(d / "model.safetensors", [](std::string& t) {
           std::uint64_t n = 0;
           std::memcpy(&n, t.data(), 8);
           const auto header = nlohmann::json::parse(t.substr(8, n));
           const std::uint64_t at = 8 + n + header["model.layers.0.mlp.up_proj.weight"]["data_offsets"][0].get<std::uint64_t>();
           t[at + 10] = '\xc0';  // bf16 0x7fc0: NaN, at element 5
           t[at + 11] = '\x7f';
         });
       },
       "tensor 'model.layers.0.mlp.up_proj.weight' in "},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const auto model = copy_tiny_random_model(dir.path() / "model");
    c.damage(model);
    const auto home = dir.path() / "home";
    const auto r = run_host({"--port", "0", "--model", "m=" + model.string()}, {{"MEMRA_HOME", home.string()}});
    EXPECT_EQ(r.exit_code, 66) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(model.string()), std::string::npos) << "the error does not name the user's files: " << r.err;
    EXPECT_EQ(r.err.find(".memra"), std::string::npos) << "the error names a repack: " << r.err;
    std::vector<std::string> repacks;
    if (std::filesystem::exists(home / "repacks"))
      for (const auto& e : std::filesystem::directory_iterator(home / "repacks"))
        if (e.path().filename() != ".locks") repacks.push_back(e.path().filename().string());
    EXPECT_TRUE(repacks.empty()) << ::testing::PrintToString(repacks);
    auto reg = registry::Registry::open(home / "registry.db");
    ASSERT_TRUE(reg) << reg.error().message;
    EXPECT_TRUE(reg->list_checkpoints()->empty()) << "a checkpoint was recorded";
    if (c.name == "a NaN weight") {  // served in place, it is refused too
      const auto in_place = run_host({"--port", "0", "--no-repack", "--model", "m=" + model.string()},
                                     {{"MEMRA_HOME", home.string()}});
      EXPECT_EQ(in_place.exit_code, 66) << in_place.err;
      EXPECT_NE(in_place.err.find(c.expected), std::string::npos) << in_place.err;
    }
  }
}

// Three hosts sharing a MEMRA_HOME, started together on a model none has repacked yet:
// all three serve, one repack is written and recorded, the others reuse it.
TEST(ServerModels, HostsSharingMemraHomeMakeOneFirstLoadRepack) {
  TempDir dir;
  const auto home = dir.path() / "shared-home";
  const std::string model = "m=" + kDefaultModel.string();
  std::vector<std::future<std::unique_ptr<HostProcess>>> starting;
  std::vector<std::string> why(3);
  for (int i = 0; i < 3; ++i)
    starting.push_back(std::async(std::launch::async, [&, i] {
      return HostProcess::start({"--model", model}, {{"MEMRA_HOME", home.string()}}, &why[static_cast<size_t>(i)]);
    }));
  std::vector<std::unique_ptr<HostProcess>> hosts;
  for (auto& f : starting) hosts.push_back(f.get());
  int reused = 0, repacked = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(hosts[static_cast<size_t>(i)]) << why[static_cast<size_t>(i)];
    EXPECT_EQ(http(hosts[static_cast<size_t>(i)]->port(), post("/v1/chat/completions", chat_body("m", 2))).status, 200);
    const std::string log = hosts[static_cast<size_t>(i)]->log();
    reused += log.find("reusing the repack") != std::string::npos;
    repacked += log.find("provenance recorded") != std::string::npos;
  }
  EXPECT_EQ(repacked, 1);
  EXPECT_EQ(reused, 2);
  int dirs = 0;
  for (const auto& e : std::filesystem::directory_iterator(home / "repacks")) dirs += e.path().extension() == ".memra";
  EXPECT_EQ(dirs, 1);
  auto reg = registry::Registry::open(home / "registry.db");
  ASSERT_TRUE(reg) << reg.error().message;
  EXPECT_EQ(reg->list_repacks()->size(), 1u);
}

// The first load says what it does while it does it: validation, repack progress (a
// line every 2 s; the repack's test hook holds it at its 3rd tensor for 2.5 s), and the
// engine set-up.
TEST(ServerModels, AFirstLoadLogsItsProgress) {
  std::string why;
  auto host = HostProcess::start({}, {{"MEMRA_REPACK_FAULT", "pause-tensor:3:2500"}}, &why);
  ASSERT_TRUE(host) << why;
  const std::string log = host->log();
  for (const char* line : {"loading the tokenizer and chat template", "first load of ", "validating it, then repacking",
                           "% (", " tensors)", "repacked ", "setting up the engine (CPU backend", "engine ready in "})
    EXPECT_NE(log.find(line), std::string::npos) << "'" << line << "' is not in the log:\n" << log;
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

// A mixed checkpoint is gated per scheme: tests/models/llama-nvfp4 holds NVFP4 matrices read
// as published beside its bf16 embeddings and head; each scheme's combo must allow the load.
TEST(ServerModels, RegistryGateChecksEveryScheme) {
  TempDir dir;
  const auto db = dir.path() / "registry.db";
  const std::string model = "--model=q=" + (std::filesystem::path(MEMRA_SOURCE_ROOT) / "tests/models/llama-nvfp4").string();
  seed_verdict(db, {"llama", "bf16", "", "cpu"}, registry::Verdict::supported, "set by tests/server/process_model_test.cpp");
  seed_verdict(db, {"llama", "nvfp4", "", "cpu"}, registry::Verdict::generic, "set by tests/server/process_model_test.cpp");
  auto r = run_host({"--port", "0", "--registry", db.string(), model});
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("(family llama, quant nvfp4, no drafter, arch cpu), which some of its matrices use, is not verified"),
            std::string::npos)
      << r.err;

  seed_verdict(db, {"llama", "nvfp4", "", "cpu"}, registry::Verdict::rejected, "set by tests/server/process_model_test.cpp");
  r = run_host({"--port", "0", "--registry", db.string(), model, "--allow-generic"});
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("quant nvfp4"), std::string::npos) << r.err;

  seed_verdict(db, {"llama", "nvfp4", "", "cpu"}, registry::Verdict::supported, "set by tests/server/process_model_test.cpp");
  TempDir home;
  std::string why;
  auto host = HostProcess::start({"--registry", db.string(), model}, {{"MEMRA_HOME", home.path().string()}}, &why);
  ASSERT_TRUE(host) << why;
  const auto done = http(host->port(), post("/v1/completions", R"({"model":"q","prompt":"hello","max_tokens":2})"));
  EXPECT_EQ(done.status, 200) << done.body;
  for (const char* scheme : {"bf16", "nvfp4"})
    EXPECT_NE(host->log().find(std::string("registry verdict supported for (family llama, quant ") + scheme), std::string::npos)
        << host->log();
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

// The memory plan (docs/SERVING.md, "Memory plan"): without --max-context a model gets its
// full trained context (the config's max_position_embeddings), the KV cache --max-running
// contexts of it where they fit, the plan in /v1/models, /metrics and the log; settings that
// cannot fit stop the start with the numbers.
TEST(ServerModels, TheMemoryPlanGivesTheModelItsFullContextAndRefusesWhatCannotFit) {
  std::ifstream config(kDefaultModel / "config.json");
  const int64_t positions = nlohmann::json::parse(config)["max_position_embeddings"];
  std::string why;
  auto host = HostProcess::start({"--max-running", "3"}, {}, &why);
  ASSERT_TRUE(host) << why;
  const auto models = nlohmann::json::parse(http(host->port(), get("/v1/models")).body);
  const auto& m = models["data"][0];
  EXPECT_EQ(m["max_model_len"], positions);
  EXPECT_EQ(m["memra"]["context"], positions);
  EXPECT_EQ(m["memra"]["context_reduced"], false);
  EXPECT_EQ(m["memra"]["kv_cache_tokens"], 3 * positions);
  EXPECT_EQ(m["memra"]["memory_fraction"], 0.9);
  EXPECT_GT(m["memra"]["budget_bytes"].get<uint64_t>(), m["memra"]["kv_cache_bytes"].get<uint64_t>());
  ASSERT_TRUE(m["memra"]["plan"].is_array() && !m["memra"]["plan"].empty()) << m.dump();
  const std::string first = m["memra"]["plan"][0];
  EXPECT_EQ(first.rfind("memory plan on CPU reference (cpu): ", 0), 0u) << first;
  EXPECT_NE(host->log().find(first), std::string::npos) << host->log();
  const std::string metrics = http(host->port(), get("/metrics")).body;
  EXPECT_NE(metrics.find("memra_context_tokens{model=\"memra-demo\"} " + std::to_string(positions)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("memra_kv_cache_tokens{model=\"memra-demo\"} " + std::to_string(3 * positions)), std::string::npos);
  // The whole context serves: a prompt and max_tokens that fill it exactly.
  auto tok = http(host->port(), post("/tokenize", R"({"model":"memra-demo","messages":[{"role":"user","content":"hello"}]})"));
  ASSERT_EQ(tok.status, 200) << tok.body;
  const int64_t prompt = nlohmann::json::parse(tok.body)["count"];
  auto res = http(host->port(), post("/v1/chat/completions", chat_body("memra-demo", static_cast<int>(positions - prompt + 1))));
  EXPECT_EQ(res.status, 400) << res.body;
  res = http(host->port(), post("/v1/chat/completions", R"({"model":"memra-demo","messages":[{"role":"user","content":"hello"}],"max_tokens":)" +
                                                            std::to_string(positions - prompt) + R"(,"ignore_eos":true})"));
  ASSERT_EQ(res.status, 200) << res.body;
  EXPECT_EQ(nlohmann::json::parse(res.body)["usage"]["total_tokens"], positions);
  host.reset();

  auto r = run_host({"--port", "0", "--gpu-memory-fraction", "0"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("--gpu-memory-fraction must be a number in (0, 1]"), std::string::npos) << r.err;
  r = run_host({"--port", "0", "--gpu-memory-fraction", "0.00001"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("leaves nothing for its KV cache"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise --gpu-memory-fraction"), std::string::npos) << r.err;
  r = run_host({"--port", "0", "--kv-cache-tokens", "4294967296"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("--kv-cache-tokens 4294967296 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("lower --kv-cache-tokens or --max-context"), std::string::npos) << r.err;
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
