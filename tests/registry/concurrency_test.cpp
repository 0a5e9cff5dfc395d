// Two processes writing the same registry at once lose nothing and leave it consistent.
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "registry/registry.hpp"
#include "tests/registry/test_util.hpp"

namespace memra::registry {
namespace {

using test::raw_query;
using test::TempDir;

constexpr int kWrites = 200;

// Child body: opens the (possibly not yet existing) registry and writes.
// Returns the process exit code; prints the first failure.
int child_writes(const std::filesystem::path& path, int who, int go_fd) {
  char go = 0;
  if (read(go_fd, &go, 1) != 1) return 10;  // wait until both children exist
  auto reg = Registry::open(path);
  if (!reg.ok()) {
    std::fprintf(stderr, "child %d open: %s\n", who, reg.error().message.c_str());
    return 11;
  }
  for (int i = 0; i < kWrites; ++i) {
    auto info = test::sample_checkpoint("/models/p" + std::to_string(who) + "/m" + std::to_string(i));
    auto ck = reg->record_checkpoint(info);
    if (!ck.ok()) {
      std::fprintf(stderr, "child %d checkpoint %d: %s\n", who, i, ck.error().message.c_str());
      return 12;
    }
    GateRecord g;
    g.key = {"llama", "q4_k", "", "cpu"};  // both children append to the same row
    g.gate = "p" + std::to_string(who);
    g.pass = (i % 2) == 0;
    g.tok_s = i;
    auto combo = reg->record_gate(g);
    if (!combo.ok()) {
      std::fprintf(stderr, "child %d gate %d: %s\n", who, i, combo.error().message.c_str());
      return 13;
    }
  }
  return 0;
}

TEST(RegistryConcurrency, TwoProcessesWritingAtOnceLoseNoRow) {
  TempDir dir;
  auto path = dir / "fresh/registry.db";  // neither child finds a database: both race to create and migrate it
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  std::vector<pid_t> pids;
  for (int who = 0; who < 2; ++who) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(pipefd[1]);
      _exit(child_writes(path, who, pipefd[0]));
    }
    pids.push_back(pid);
  }
  close(pipefd[0]);
  ASSERT_EQ(write(pipefd[1], "gg", 2), 2);  // release both at once
  close(pipefd[1]);
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed; see its stderr above";
  }

  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  EXPECT_EQ(raw_query(path, "SELECT count(*), count(DISTINCT source_path) FROM checkpoints"),
            std::vector<std::string>{std::to_string(2 * kWrites) + "|" + std::to_string(2 * kWrites)});
  EXPECT_EQ(raw_query(path, "SELECT json_extract(g.value,'$.gate'), count(*), count(DISTINCT "
                            "json_extract(g.value,'$.tok_s')) FROM combos, json_each(combos.evidence,'$.gates') g "
                            "WHERE quant='q4_k' AND arch='cpu' AND json_extract(g.value,'$.gate') IN ('p0','p1') GROUP BY 1 ORDER BY 1"),
            (std::vector<std::string>{"p0|200|200", "p1|200|200"}));
  // Migrated once, shipped combos imported once.
  EXPECT_EQ(raw_query(path, "SELECT value FROM meta WHERE key='schema_version'"),
            std::vector<std::string>{std::to_string(kSchemaVersion)});
  auto reg = Registry::open(path);
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  EXPECT_EQ(reg->list_checkpoints()->size(), 2u * kWrites);
}

TEST(RegistryConcurrency, TwoCliProcessStreamsLoseNoRow) {
  TempDir dir;
  auto path = dir / "registry.db";
  auto writer = [&](int who, std::vector<int>* failures) {
    for (int i = 0; i < kWrites; ++i) {
      auto r = test::run_cli({"record-gate", "--db", path.string(), "--family", "llama", "--quant", "q8_0",
                              "--arch", "cpu", "--gate", "cli" + std::to_string(who), "--result", "pass", "--tok-s",
                              std::to_string(i), "--note", "n" + std::to_string(i)});
      if (r.exit_code != 0) {
        failures->push_back(i);
        ADD_FAILURE() << "writer " << who << " run " << i << " exit " << r.exit_code << ": " << r.err;
      }
    }
  };
  std::vector<int> f0, f1;
  std::thread t0(writer, 0, &f0), t1(writer, 1, &f1);
  t0.join();
  t1.join();
  EXPECT_TRUE(f0.empty() && f1.empty());
  EXPECT_EQ(raw_query(path, "PRAGMA integrity_check"), std::vector<std::string>{"ok"});
  EXPECT_EQ(raw_query(path, "SELECT json_extract(g.value,'$.gate'), count(*), count(DISTINCT "
                            "json_extract(g.value,'$.note')) FROM combos, json_each(combos.evidence,'$.gates') g "
                            "WHERE quant='q8_0' AND arch='cpu' AND json_extract(g.value,'$.gate') IN ('cli0','cli1') GROUP BY 1 ORDER BY 1"),
            (std::vector<std::string>{"cli0|200|200", "cli1|200|200"}));
}

}  // namespace
}  // namespace memra::registry
