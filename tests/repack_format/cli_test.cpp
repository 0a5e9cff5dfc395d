// memra-repack from the outside: --help, usage errors (exit 2), real runs on the fixtures
// with provenance in a temporary registry, an existing destination, injected failures,
// and kills midway (SIGTERM: cleaned up; SIGKILL: never a half-written DST, and the next
// run removes the leftover).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "registry/registry.hpp"
#include "repack/format/reader.hpp"
#include "tests/repack_format/helpers.hpp"

namespace {

using namespace memra;
namespace fs = std::filesystem;
using repack_test::run_command;
using repack_test::TempDir;

const std::string kTool = MEMRA_REPACK_BINARY;

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

TEST(MemraRepackCli, HelpDescribesUsage) {
  std::string out;
  EXPECT_EQ(run_command(kTool + " --help", &out), 0);
  for (const char* s : {"usage: memra-repack SRC -o DST", "--quant", "--registry", "--threads", "--bench", "q4_k", "iq4_xs", "q4_0", "fp8"})
    EXPECT_NE(out.find(s), std::string::npos) << s;
  EXPECT_EQ(run_command(kTool + " --version", &out), 0);
  EXPECT_EQ(out.rfind("memra-repack ", 0), 0u) << out;
}

TEST(MemraRepackCli, UsageErrorsExitTwo) {
  TempDir tmp;
  const std::string src = q(memra::testing::fixture("gguf/llama/llama-Q8_0.gguf"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "missing SRC"},
      {src, "missing -o DST"},
      {src + " -o " + q(tmp / "x") + " --quant q3_k", "unknown --quant"},
      {src + " -o " + q(tmp / "x") + " --threads 0", "--threads needs"},
      {src + " -o " + q(tmp / "x") + " --frobnicate", "unknown option"},
      {src + " " + src + " -o " + q(tmp / "x"), "one SRC only"},
      {src + " -o", "needs a directory"},
      {src + " -o " + q(tmp / "x") + " --registry r.db --no-registry", "contradict"},
  };
  for (const auto& [args, message] : cases) {
    std::string out;
    EXPECT_EQ(run_command(kTool + " " + args, &out), 2) << args;
    EXPECT_NE(out.find(message), std::string::npos) << args << ": " << out;
    EXPECT_NE(out.find("--help"), std::string::npos) << out;
  }
  EXPECT_TRUE(repack_test::list_dir(tmp.path()).empty());
}

TEST(MemraRepackCli, RepacksFixturesAndRecordsProvenance) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path reg = tmp / "reg.db";
  struct Run {
    fs::path src;
    std::string quant;
  };
  const std::vector<Run> runs = {{memra::testing::fixture("gguf/llama/llama-Q6_K.gguf"), "keep"},
                                 {memra::testing::fixture("models/llama"), "q4_k"},
                                 {memra::testing::fixture("models/qwen3"), "bf16"}};
  int n = 0;
  for (const Run& r : runs) {
    const fs::path dst = tmp / ("out" + std::to_string(n++) + ".memra");
    std::string out;
    ASSERT_EQ(run_command(kTool + " " + q(r.src) + " -o " + q(dst) + " --quant " + r.quant + " --registry " + q(reg) + " -j 2", &out), 0) << out;
    EXPECT_NE(out.find("manifest sha256 " + repack_test::sha256_file(dst / "manifest.json")), std::string::npos) << out;
    EXPECT_NE(out.find("registry "), std::string::npos) << out;
    auto m = format::MemraModel::open(dst, {true, 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->manifest().precision.requested, r.quant);
  }
  auto db = registry::Registry::open(reg);
  ASSERT_TRUE(db.ok());
  auto ckpts = db->list_checkpoints();
  ASSERT_TRUE(ckpts.ok());
  EXPECT_EQ(ckpts->size(), 3u);
  auto reps = db->list_repacks();
  ASSERT_TRUE(reps.ok());
  EXPECT_EQ(reps->size(), 3u);
  // The same source again: the checkpoint row is reused, a second repack row is added.
  std::string out;
  ASSERT_EQ(run_command(kTool + " " + q(runs[0].src) + " -o " + q(tmp / "again.memra") + " --registry " + q(reg) + " --quiet", &out), 0) << out;
  EXPECT_EQ(db->list_checkpoints()->size(), 3u);
  EXPECT_EQ(db->list_repacks()->size(), 4u);
}

// The two schemes memra-repack learned last, through the tool's own option parsing: the
// matrices land in them, the head and attn_v in q6_k, a --tensor-scheme naming the other.
TEST(MemraRepackCli, QuantizesToQ4_0AndIq4Xs) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const std::string src = q(memra::testing::fixture("models/llama"));
  for (const std::string quant : {"q4_0", "iq4_xs"}) {
    const std::string other = quant == "q4_0" ? "iq4_xs" : "q4_0";
    const fs::path dst = tmp / (quant + ".memra");
    std::string out;
    ASSERT_EQ(run_command(kTool + " " + src + " -o " + q(dst) + " -q " + quant + " -t 'blk.1.ffn_down.weight=" + other +
                              "' --no-registry --quiet",
                          &out),
              0)
        << out;
    auto m = format::MemraModel::open(dst, {true, 2});
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->manifest().precision.requested, quant);
    EXPECT_EQ(m->find("blk.0.ffn_down.weight")->entry->scheme, quant);
    EXPECT_EQ(m->find("blk.1.ffn_down.weight")->entry->scheme, other);
    EXPECT_EQ(m->find("blk.0.attn_v.weight")->entry->scheme, "q6_k");
    EXPECT_EQ(m->find("output.weight")->entry->scheme, "q6_k");
  }
}

TEST(MemraRepackCli, ExistingDestinationNeedsForce) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const std::string src = q(memra::testing::fixture("gguf/llama/llama-Q8_0.gguf"));
  const fs::path dst = tmp / "m.memra";
  std::string out;
  ASSERT_EQ(run_command(kTool + " " + src + " -o " + q(dst) + " --no-registry --quiet", &out), 0) << out;
  EXPECT_EQ(run_command(kTool + " " + src + " -o " + q(dst) + " --no-registry --quiet", &out), 1);
  EXPECT_NE(out.find("already exists"), std::string::npos) << out;
  EXPECT_EQ(run_command(kTool + " " + src + " -o " + q(dst) + " --no-registry --quiet --force --quant q8_0", &out), 0) << out;
  auto m = format::MemraModel::open(dst);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->manifest().precision.requested, "q8_0");
  EXPECT_EQ(repack_test::list_dir(tmp.path()), std::vector<std::string>{"m.memra"});
}

// Failures injected midway (MEMRA_REPACK_FAULT) and a corrupt source: exit 1, nothing
// under DST, no temporary directory, no registry row.
TEST(MemraRepackCli, FailuresLeaveNothingAndRecordNothing) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path reg = tmp / "reg.db";
  const fs::path out_dir = tmp / "out";
  fs::create_directories(out_dir);
  const auto gguf = repack_test::read_bytes(memra::testing::fixture("gguf/llama/llama-Q4_K_M.gguf"));
  repack_test::write_bytes(tmp / "truncated.gguf", gguf.data(), gguf.size() / 2);
  const std::string good = q(memra::testing::fixture("models/llama"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"MEMRA_REPACK_FAULT=tensor:5 " + kTool + " " + good, "injected failure"},
      {"MEMRA_REPACK_FAULT=manifest " + kTool + " " + good, "injected failure"},
      {"MEMRA_REPACK_FAULT=rename " + kTool + " " + good + " --quant q4_k", "injected failure"},
      {kTool + " " + q(tmp / "truncated.gguf"), "truncated.gguf"},
  };
  for (const auto& [cmd, message] : cases) {
    std::string out;
    EXPECT_EQ(run_command(cmd + " -o " + q(out_dir / "m.memra") + " --registry " + q(reg), &out), 1) << cmd;
    EXPECT_NE(out.find(message), std::string::npos) << cmd << ": " << out;
    EXPECT_TRUE(repack_test::list_dir(out_dir).empty()) << cmd << " left " << ::testing::PrintToString(repack_test::list_dir(out_dir));
    if (fs::exists(reg)) {
      auto db = registry::Registry::open(reg);
      ASSERT_TRUE(db.ok());
      EXPECT_TRUE(db->list_checkpoints()->empty()) << cmd;
      EXPECT_TRUE(db->list_repacks()->empty()) << cmd;
    }
  }
}

// A copy of the llama fixture that can be edited.
fs::path copy_fixture(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& f : fs::directory_iterator(memra::testing::fixtures_dir() / "models/llama")) {
    fs::copy(f.path(), to / f.path().filename());
    fs::permissions(to / f.path().filename(), fs::perms::owner_write, fs::perm_options::add);
  }
  return to;
}

void replace_in_file(const fs::path& p, const std::string& from, const std::string& to) {
  std::string text = repack_test::read_text(p);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << p;
  text.replace(at, from.size(), to);
  repack_test::write_bytes(p, text.data(), text.size());
}

// Byte offset of a tensor's data in a .safetensors file (8-byte header length, header JSON).
std::uint64_t tensor_offset(const fs::path& file, const std::string& name) {
  const auto bytes = repack_test::read_bytes(file);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  return 8 + n + header[name]["data_offsets"][0].get<std::uint64_t>();
}

// Checkpoints whose files are well formed but that cannot load — config and weights of
// different models, a broken tokenizer.json, a NaN or an Inf in a weight — are refused
// before anything is written or recorded, exit 1, and the error names the user's file.
TEST(MemraRepackCli, CheckpointsThatCannotLoadAreRefusedBeforeAnythingIsWritten) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path reg = tmp / "reg.db";
  const fs::path out_dir = tmp / "out";
  fs::create_directories(out_dir);
  struct Case {
    std::string name;
    std::function<void(const fs::path&)> damage;
    std::vector<std::string> expected;  // in the error
  };
  const std::string bf16_nan = std::string("\xc0\x7f", 2), bf16_inf = std::string("\x80\x7f", 2);
  const std::vector<Case> cases = {
      {"more layers than the weights", [](const fs::path& d) { replace_in_file(d / "config.json", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3"); },
       {"config.json", "blk.2.", "not in its weight files"}},
      {"another intermediate size", [](const fs::path& d) { replace_in_file(d / "config.json", "\"intermediate_size\": 512", "\"intermediate_size\": 384"); },
       {"model.safetensors", "has shape [512, 256]", "asks for [384, 256]", "mlp"}},
      {"broken tokenizer.json", [](const fs::path& d) { fs::resize_file(d / "tokenizer.json", 1000); },
       {"tokenizer.json", "is not valid JSON"}},
      {"a NaN", [&](const fs::path& d) {
         const auto file = d / "model.safetensors";
         auto bytes = repack_test::read_bytes(file);
         std::memcpy(bytes.data() + tensor_offset(file, "model.layers.1.mlp.down_proj.weight") + 2 * 300, bf16_nan.data(), 2);
         repack_test::write_bytes(file, bytes.data(), bytes.size());
       },
       {"'model.layers.1.mlp.down_proj.weight'", "model.safetensors", "holds NaN at element 300 (row 0, column 300)"}},
      {"an infinity in a norm", [&](const fs::path& d) {
         const auto file = d / "model.safetensors";
         auto bytes = repack_test::read_bytes(file);
         std::memcpy(bytes.data() + tensor_offset(file, "model.norm.weight") + 2 * 7, bf16_inf.data(), 2);
         repack_test::write_bytes(file, bytes.data(), bytes.size());
       },
       {"'model.norm.weight'", "holds an infinity at element 7"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path src = copy_fixture(tmp / ("src-" + std::to_string(&c - cases.data())));
    c.damage(src);
    for (const std::string quant : {"keep", "q8_0"}) {  // copied as stored, and converted
      std::string out;
      EXPECT_EQ(run_command(kTool + " " + q(src) + " --quant " + quant + " -o " + q(out_dir / "m.memra") + " --registry " + q(reg), &out), 1)
          << out;
      for (const auto& e : c.expected) EXPECT_NE(out.find(e), std::string::npos) << "'" << e << "' not in: " << out;
      EXPECT_EQ(out.find(".tmp-"), std::string::npos) << "the error names an internal path: " << out;
      EXPECT_TRUE(repack_test::list_dir(out_dir).empty()) << ::testing::PrintToString(repack_test::list_dir(out_dir));
    }
  }
  if (fs::exists(reg)) {
    auto db = registry::Registry::open(reg);
    ASSERT_TRUE(db.ok());
    EXPECT_TRUE(db->list_checkpoints()->empty());
    EXPECT_TRUE(db->list_repacks()->empty());
  }
}

pid_t spawn(const std::string& env, const std::string& cmd) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", (env + " exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits until the writer's temporary directory appears (the process is midway).
bool wait_for_temp(const fs::path& dir) {
  for (int i = 0; i < 500; ++i) {
    for (const std::string& n : repack_test::list_dir(dir))
      if (n.find(".tmp-") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(MemraRepackCli, KilledMidwayNeverLeavesAHalfWrittenOutput) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  const fs::path reg = tmp / "reg.db";
  const fs::path out_dir = tmp / "out";
  fs::create_directories(out_dir);
  const std::string env = "MEMRA_REPACK_FAULT=pause-tensor:3:20000";
  const std::string cmd = kTool + " " + q(memra::testing::fixture("models/llama")) + " -o " +
                          q(out_dir / "m.memra") + " --registry " + q(reg);
  // SIGTERM: the tool stops, removes its temporary directory and exits 130.
  pid_t pid = spawn(env, cmd);
  ASSERT_TRUE(wait_for_temp(out_dir));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
  EXPECT_TRUE(repack_test::list_dir(out_dir).empty()) << ::testing::PrintToString(repack_test::list_dir(out_dir));
  // SIGKILL: no chance to clean up, but DST never exists half-written...
  pid = spawn(env, cmd);
  ASSERT_TRUE(wait_for_temp(out_dir));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  const auto left = repack_test::list_dir(out_dir);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].rfind(".m.memra.tmp-", 0), 0u) << left[0];
  if (fs::exists(reg)) {
    auto db = registry::Registry::open(reg);
    ASSERT_TRUE(db.ok());
    EXPECT_TRUE(db->list_checkpoints()->empty());
  }
  // ...and the next run for the same destination removes the dead writer's leftovers.
  std::string out;
  ASSERT_EQ(run_command(kTool + " " + q(memra::testing::fixture("models/llama")) + " -o " + q(out_dir / "m.memra") + " --registry " + q(reg) + " --quiet", &out), 0) << out;
  EXPECT_EQ(repack_test::list_dir(out_dir), std::vector<std::string>{"m.memra"});
}

TEST(MemraRepackCli, BenchRunsOnSmallInputs) {
  MEMRA_REQUIRE_FIXTURES();
  TempDir tmp;
  std::string out;
  ASSERT_EQ(run_command(kTool + " --bench --bench-gguf " + q(memra::testing::fixture("gguf/llama/llama-Q4_K_M.gguf")) + " --bench-safetensors " +
                            q(memra::testing::fixture("models/llama")) + " --bench-repeats 1",
                        &out),
            0)
      << out;
  for (const char* s : {"GGUF source", "safetensors source", "repack keep", ".memra verify", "GB/s"}) EXPECT_NE(out.find(s), std::string::npos) << s << "\n" << out;
}

}  // namespace
