// memra-bench --table (the real binary, the tiny random shape on the CPU backend): every
// figure of issue #15's table is measured and printed in one run, beside its floor.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.hpp"

namespace {

TEST(MemraBenchTable, EveryFigureOfTheTableIsMeasuredInOneRun) {
  const auto r = memra::testing::run_command(std::string(MEMRA_BENCH_BINARY) + " --table --model tiny --backend cpu --repeats 1",
                                             memra::testing::Stderr::capture);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::vector<std::string> figures = {
      "tg bf16",  "tg q8_0",  "tg q4_k", "tg fp8", "tg q4_k depth 4096 / depth 0", "tg bf16 depth 4096 / depth 0",
      "pp512 bf16", "pp512 q8_0", "pp512 q4_k", "TTFT 2,048-token prompt, bf16", "batch-8 / batch-1 decode step, bf16",
      "batch-8 / batch-1 decode step, q4_k", "serving, 8 concurrent streams, bf16 aggregate"};
  // | figure | memra | llama.cpp | floor | goal | floor met |, the memra column a number.
  static const std::regex kRow(R"(^\| ([^|]+?) \| ([0-9.]+)( tok/s| ms)? \| [^|]+ \| [<>]= [0-9.e+]+ \| [<>]= [0-9.e+]+ \| (yes|no) \|$)");
  std::vector<std::string> seen;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_match(line, m, kRow)) seen.push_back(m[1].str());
  }
  ASSERT_EQ(seen.size(), figures.size()) << r.out;
  for (size_t i = 0; i < figures.size(); ++i) EXPECT_EQ(seen[i].rfind(figures[i], 0), 0u) << seen[i];
  EXPECT_NE(r.out.find("floors met"), std::string::npos) << r.out;
  // Bad use: a checkpoint with --table.
  EXPECT_EQ(memra::testing::run_command(std::string(MEMRA_BENCH_BINARY) + " /nonexistent --table", memra::testing::Stderr::merge).exit_code, 2);
}

}  // namespace
