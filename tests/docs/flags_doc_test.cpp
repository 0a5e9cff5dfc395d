// docs/FLAGS.md against the tools themselves: each tool's section names exactly the flags
// its --help prints (memra-registry: with every subcommand's --help), and every MEMRA_*
// variable the help names is documented there; memra-host's section names exactly the
// variables its help does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/command.hpp"

namespace memra::testing {
namespace {

std::set<std::string> matches(const std::string& text, const std::regex& re) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) out.insert((*it)[1]);
  return out;
}

// The "## <tool>" section of docs/FLAGS.md ("" when there is none).
std::string flags_doc_section(const std::string& tool) {
  std::ifstream in(std::string(MEMRA_SOURCE_ROOT) + "/docs/FLAGS.md");
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  const auto begin = text.find("\n## " + tool + "\n");
  if (begin == std::string::npos) return {};
  const auto end = text.find("\n## ", begin + 1);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::string help_of(const std::string& binary, const std::string& args) {
  const CommandResult r = run_command("'" + binary + "' " + args + " --help", Stderr::merge);
  EXPECT_EQ(r.exit_code, 0) << binary << " " << args << " --help:\n" << r.out;
  return r.out;
}

class ToolHelp : public ::testing::TestWithParam<std::string> {};

TEST_P(ToolHelp, FlagsMatchFlagsMd) {
  const std::string tool = GetParam();
  const std::string binary = std::string(MEMRA_BINARY_ROOT) + "/bin/" + tool;
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << tool << " is not built in this configuration";
  std::string help = help_of(binary, "");
  if (tool == "memra-registry")
    for (const char* command : {"list", "show", "combos", "check", "prune", "import", "record-gate"})
      help += help_of(binary, command);
  const std::string doc = flags_doc_section(tool);
  ASSERT_FALSE(doc.empty()) << "docs/FLAGS.md has no '## " << tool << "' section";
  const std::regex flag(R"((--[a-z][a-z0-9-]+))");
  const std::regex env(R"(\b(MEMRA_[A-Z_]+)\b)");
  EXPECT_EQ(matches(help, flag), matches(doc, flag)) << tool << " --help:\n" << help;
  const std::set<std::string> documented = matches(doc, env);
  if (tool == "memra-host") {
    EXPECT_EQ(matches(help, env), documented) << help;
  }
  for (const std::string& v : matches(help, env)) EXPECT_TRUE(documented.count(v)) << tool << " --help names " << v;
}

INSTANTIATE_TEST_SUITE_P(Tools, ToolHelp,
                         ::testing::Values("memra-host", "memra-gen", "memra-bench", "memra-bench-tokenizer", "memra-kernel-check",
                                           "memra-repack", "memra-registry", "memra-tokenize", "memra-perplexity"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace memra::testing
