// The real memra-registry binary: help, usage errors, check's exit codes, and
// --json output compared with what the API reads from the same file.
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using nlohmann::json;
using test::run_cli;
using test::TempDir;

class RegistryCli : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = (dir_ / "registry.db").string();
    auto r = Registry::open(db_);
    ASSERT_TRUE(r.ok()) << r.error().message;
    reg_.emplace(std::move(*r));
  }
  test::CliResult cli(std::vector<std::string> args) {
    args.push_back("--db");
    args.push_back(db_);
    return run_cli(args);
  }
  json parse_out(const test::CliResult& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j;
  }
  TempDir dir_;
  std::string db_;
  std::optional<Registry> reg_;
};

TEST_F(RegistryCli, EverySubcommandHasHelp) {
  auto top = run_cli({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  for (std::string cmd : {"list", "show", "combos", "check", "import", "record-gate"}) {
    EXPECT_NE(top.out.find("  " + cmd + " "), std::string::npos) << top.out;
    auto r = run_cli({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    EXPECT_EQ(r.out.rfind("Usage: memra-registry " + cmd, 0), 0u) << r.out;
    EXPECT_NE(r.out.find("--db PATH"), std::string::npos) << r.out;
    if (cmd != "import" && cmd != "record-gate") {
      EXPECT_NE(r.out.find("--json"), std::string::npos) << cmd;
    }
  }
}

TEST_F(RegistryCli, UsageErrorsExitWith2) {
  std::vector<std::vector<std::string>> bad = {
      {"frobnicate"},
      {},
      {"list", "--bogus"},
      {"list", "extra-arg"},
      {"show"},
      {"check", "--family", "llama", "--quant", "q4_k"},              // --arch missing
      {"check", "--family", "llama", "--quant", "q4_k", "--arch"},    // value missing
      {"check", "--family", "llama", "--quant", "q4_k", "--arch", "sm_80"},
      {"combos", "--arch", "pdp11"},
      {"record-gate", "--family", "llama", "--quant", "q4_k", "--arch", "cpu", "--gate", "g", "--result", "maybe"},
      {"record-gate", "--family", "llama", "--quant", "q4_k", "--arch", "cpu", "--gate", "g", "--result", "pass",
       "--tok-s", "fast"},
      {"record-gate", "--family", "llama", "--quant", "q4_k", "--arch", "cpu", "--gate", "g", "--result", "pass",
       "--verdict", "great"},
      {"--verbose", "list"},
  };
  for (const auto& args : bad) {
    auto r = run_cli(args, {{"MEMRA_REGISTRY", db_}});
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_FALSE(r.err.empty()) << joined;
  }
}

TEST_F(RegistryCli, CheckExitCodesFollowTheVerdict) {
  ASSERT_EQ(cli({"record-gate", "--family", "llama", "--quant", "q4_k", "--arch", "sm_90a", "--gate", "bench",
                 "--result", "pass", "--tok-s", "212.5", "--verdict", "supported"})
                .exit_code,
            0);
  ASSERT_EQ(cli({"record-gate", "--family", "llama", "--quant", "q4_k", "--drafter", "d1", "--arch", "sm_90a",
                 "--gate", "spec-identity", "--result", "fail", "--verdict", "rejected"})
                .exit_code,
            0);
  struct Case {
    std::vector<std::string> key;
    int code;
    std::string word;
  };
  std::vector<Case> cases = {
      {{"--family", "llama", "--quant", "q4_k", "--arch", "sm_90a"}, 0, "supported"},
      {{"--family", "llama", "--quant", "q4_k", "--drafter", "d1", "--arch", "sm_90a"}, 4, "rejected"},
      {{"--family", "llama", "--quant", "q4_k", "--arch", "sm_120a"}, 3, "generic"},  // no row
      {{"--family", "mamba", "--quant", "q4_k", "--arch", "cpu"}, 3, "generic"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), c.key.begin(), c.key.end());
    auto r = cli(args);
    EXPECT_EQ(r.exit_code, c.code) << r.err;
    EXPECT_EQ(r.out, c.word + "\n");
    // The API agrees.
    ComboKey key{c.key[1], c.key[3], c.key.size() == 8 ? c.key[5] : "", c.key.back()};
    EXPECT_EQ(to_string(*reg_->check(key)), c.word);
  }
  // Every shipped rejected combo exits 4.
  auto combos = reg_->combos();
  for (const auto& c : *combos) {
    if (c.verdict != Verdict::rejected || c.source.rfind("shipped:", 0) != 0) continue;
    std::vector<std::string> args = {"check", "--family", c.key.family, "--quant", c.key.quant, "--arch", c.key.arch};
    if (!c.key.drafter.empty()) args.insert(args.end(), {"--drafter", c.key.drafter});
    EXPECT_EQ(cli(args).exit_code, 4);
  }
}

TEST_F(RegistryCli, JsonOutputMatchesTheApi) {
  auto ck = reg_->record_checkpoint(test::sample_checkpoint((dir_ / "models/a").string(), 'a'));
  ASSERT_TRUE(ck.ok());
  auto rp = reg_->record_repack({ck->id, (dir_ / "a.memra").string(), "f00d", "memra-repack 0.1.0",
                                 R"({"quant":"q4_k","group":32})"});
  ASSERT_TRUE(rp.ok());
  GateRecord g;
  // f16 on the CPU is shipped as generic (no fixture verifies it yet).
  g.key = {"llama", "f16", "", "cpu"};
  g.gate = "oracle-logits";
  g.pass = true;
  g.tok_s = 3.25;
  ASSERT_TRUE(reg_->record_gate(g).ok());

  // list
  auto list = cli({"list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  json lj = parse_out(list);
  ASSERT_EQ(lj["checkpoints"].size(), 1u);
  const json& c = lj["checkpoints"][0];
  EXPECT_EQ(c["id"], ck->id);
  EXPECT_EQ(c["source_path"], ck->source_path);
  EXPECT_EQ(c["format"], "safetensors");
  EXPECT_EQ(c["sha256"], ck->sha256);
  EXPECT_EQ(c["size_bytes"], ck->size_bytes);
  EXPECT_EQ(c["family"], ck->family);
  EXPECT_EQ(c["architecture"], ck->architecture);
  EXPECT_EQ(c["quant"], ck->quant);
  EXPECT_EQ(c["parameters"], json::parse(ck->parameters_json));
  EXPECT_EQ(c["recorded_at"], ck->recorded_at);
  ASSERT_EQ(lj["repacks"].size(), 1u);
  const json& r = lj["repacks"][0];
  EXPECT_EQ(r["id"], rp->id);
  EXPECT_EQ(r["checkpoint_id"], ck->id);
  EXPECT_EQ(r["output_path"], rp->output_path);
  EXPECT_EQ(r["output_hash"], "f00d");
  EXPECT_EQ(r["tool_version"], "memra-repack 0.1.0");
  EXPECT_EQ(r["options"], json::parse(rp->options_json));
  EXPECT_EQ(r["created_at"], rp->created_at);

  // show, by each kind of key
  for (std::string key : {std::to_string(ck->id), ck->sha256, ck->source_path, rp->output_path}) {
    auto show = cli({"show", key, "--json"});
    ASSERT_EQ(show.exit_code, 0) << show.err;
    json sj = parse_out(show);
    EXPECT_EQ(sj["checkpoint"], c) << key;
    EXPECT_EQ(sj["repacks"], lj["repacks"]) << key;
  }
  EXPECT_EQ(cli({"show", "/no/such/model"}).exit_code, 1);

  // combos
  auto combos = cli({"combos", "--json"});
  ASSERT_EQ(combos.exit_code, 0) << combos.err;
  json cj = parse_out(combos);
  auto api = reg_->combos();
  ASSERT_EQ(cj["combos"].size(), api->size());
  for (std::size_t i = 0; i < api->size(); ++i) {
    const Combo& a = (*api)[i];
    const json& j = cj["combos"][i];
    EXPECT_EQ(j["family"], a.key.family);
    EXPECT_EQ(j["quant"], a.key.quant);
    EXPECT_EQ(j["drafter"], a.key.drafter);
    EXPECT_EQ(j["arch"], a.key.arch);
    EXPECT_EQ(j["verdict"], to_string(a.verdict));
    EXPECT_EQ(j["evidence"], json::parse(a.evidence_json));
    EXPECT_EQ(j["source"], a.source);
    EXPECT_EQ(j["updated_at"], a.updated_at);
  }
  auto cpu_q4k = parse_out(cli({"combos", "--json", "--arch", "cpu", "--quant", "f16"}));
  ASSERT_EQ(cpu_q4k["combos"].size(), reg_->combos({"cpu", "", "f16"})->size());
  EXPECT_EQ(cpu_q4k["combos"][0]["evidence"]["gates"].back()["tok_s"], 3.25);

  // check
  auto check = cli({"check", "--family", "llama", "--quant", "f16", "--arch", "cpu", "--json"});
  EXPECT_EQ(check.exit_code, 3);
  json kj = parse_out(check);
  EXPECT_EQ(kj["verdict"], "generic");
  EXPECT_EQ(kj["drafter"], "");
  EXPECT_EQ(kj["combo"]["source"], "gate");
  auto none = parse_out(cli({"check", "--family", "qwen3", "--quant", "q4_k", "--arch", "cpu", "--json"}));
  EXPECT_TRUE(none["combo"].is_null());
  EXPECT_EQ(none["verdict"], "generic");
}

TEST_F(RegistryCli, HumanTablesAreAligned) {
  auto r = cli({"combos"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines;
  for (std::size_t p = 0, q; (q = r.out.find('\n', p)) != std::string::npos; p = q + 1)
    lines.push_back(r.out.substr(p, q - p));
  ASSERT_GE(lines.size(), 2u);
  auto col = lines[0].find("VERDICT");
  auto src = lines[0].find("SOURCE");
  ASSERT_NE(col, std::string::npos);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::string verdict = lines[i].substr(col, lines[i].find(' ', col) - col);
    EXPECT_TRUE(verdict == "supported" || verdict == "generic" || verdict == "rejected") << lines[i];
    EXPECT_EQ(lines[i].substr(src, 8), "shipped:") << lines[i];
  }
  EXPECT_EQ(lines.size() - 1, reg_->combos()->size());
}

TEST_F(RegistryCli, DatabaseComesFromTheEnvironment) {
  TempDir home;
  auto r = run_cli({"record-gate", "--family", "llama", "--quant", "f16", "--arch", "cpu", "--gate", "g", "--result",
                    "pass"},
                   {{"MEMRA_HOME", home.path().string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto at_home = Registry::open(home / "registry.db");
  ASSERT_TRUE(at_home.ok());
  EXPECT_EQ((**at_home->find_combo({"llama", "f16", "", "cpu"})).source, "gate");

  auto other = (home / "elsewhere/reg.db").string();
  r = run_cli({"record-gate", "--family", "envtest", "--quant", "q6_k", "--arch", "cpu", "--gate", "g", "--result",
               "pass"},
              {{"MEMRA_HOME", home.path().string()}, {"MEMRA_REGISTRY", other}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_FALSE(at_home->find_combo({"envtest", "q6_k", "", "cpu"})->has_value());
  // --db beats both.
  r = run_cli({"--db", db_, "check", "--family", "envtest", "--quant", "q6_k", "--arch", "cpu"},
              {{"MEMRA_REGISTRY", other}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(reg_->find_combo({"envtest", "q6_k", "", "cpu"})->has_value());
}

// Read-only commands create nothing: where no registry exists they answer from the
// shipped combos (the host's first-run verdicts), and the path stays absent.
TEST_F(RegistryCli, ReadOnlyCommandsCreateNoDatabase) {
  const auto absent = dir_ / "nowhere" / "registry.db";
  for (std::vector<std::string> args : {std::vector<std::string>{"list"}, {"combos", "--json"},
                                        {"show", "1"},
                                        {"check", "--family", "llama", "--quant", "q4_k", "--arch", "cpu"}}) {
    SCOPED_TRACE(args.front());
    const std::string command = args.front();
    args.insert(args.end(), {"--db", absent.string()});
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, command == "show" ? 1 : 0) << r.err;
    EXPECT_NE(r.err.find("no registry at " + absent.string() + " yet"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(absent.parent_path())) << "a read-only command created " << absent;
    if (command == "check") {  // llama/q4_k/cpu ships supported
      EXPECT_EQ(r.out, "supported\n");
    }
    if (command == "combos") {
      EXPECT_FALSE(parse_out(r).empty());
    }
  }
  // A writing command does create it.
  auto w = run_cli({"record-gate", "--family", "llama", "--quant", "f16", "--arch", "cpu", "--gate", "g", "--result", "pass",
                    "--db", absent.string()});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_TRUE(std::filesystem::exists(absent));
}

TEST_F(RegistryCli, DamagedDatabaseIsAnErrorNotACrash) {
  auto bad = (dir_ / "bad.db").string();
  test::write_file(bad, std::string(8192, '\x5a'));
  for (std::vector<std::string> args : {std::vector<std::string>{"list"}, {"combos", "--json"},
                                        {"check", "--family", "llama", "--quant", "q4_k", "--arch", "cpu"}}) {
    args.insert(args.end(), {"--db", bad});
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not an SQLite database"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST_F(RegistryCli, ImportAndHumanListWork) {
  test::write_file(dir_ / "mine.json",
                   R"({"format":"memra-combos","version":2,"combos":[{"family":"qwen3","quant":"q4_k","arch":"cpu",)"
                   R"("verdict":"supported","evidence":{"notes":"local run"}}]})");
  auto imp = cli({"import", (dir_ / "mine.json").string()});
  ASSERT_EQ(imp.exit_code, 0) << imp.err;
  EXPECT_NE(imp.out.find("1 inserted"), std::string::npos) << imp.out;
  EXPECT_EQ(cli({"check", "--family", "qwen3", "--quant", "q4_k", "--arch", "cpu"}).exit_code, 0);
  EXPECT_EQ(cli({"import", (dir_ / "missing.json").string()}).exit_code, 1);

  ASSERT_TRUE(reg_->record_checkpoint(test::sample_checkpoint((dir_ / "m").string())).ok());
  auto list = cli({"list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("Checkpoints (1)"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find((dir_ / "m").string()), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("No repacks recorded."), std::string::npos) << list.out;
}

}  // namespace
}  // namespace memra::registry
