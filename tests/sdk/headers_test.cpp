// Every public header compiles on its own (self-contained, include-guarded) in strict
// C11 and strict C++20, as a plugin author's compiler would see it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/sdk/sdk_test_util.hpp"

namespace memra::sdk_test {
namespace {

namespace fs = std::filesystem;

fs::path include_dir() { return fs::path(MEMRA_SOURCE_ROOT) / "sdk" / "include"; }

std::vector<std::string> headers() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(include_dir() / "memra")) {
    if (e.path().extension() == ".h") out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Compiles one TU per header (included twice: the guard must hold) with `flags`.
void compile_each_header(const std::string& compiler, const std::string& lang, const std::string& flags) {
  TempDir tmp;
  std::vector<std::string> hs = headers();
  ASSERT_GE(hs.size(), 7u) << "expected the v1 headers in " << include_dir();
  for (const std::string& h : hs) {
    SCOPED_TRACE(h);
    fs::path tu = tmp.path() / ("check_" + h + (lang == "c" ? ".c" : ".cpp"));
    std::ofstream(tu) << "#include <memra/" << h << ">\n#include <memra/" << h << ">\n";
    memra::testing::CommandResult r = run(sh_quote(compiler) + " -x " + lang + " " + flags + " -fsyntax-only -I" +
                      sh_quote(include_dir().string()) + " " + sh_quote(tu.string()));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "") << "diagnostics for " << h;
  }
}

TEST(SdkHeaders, EachCompilesAloneAsStrictC11) {
  compile_each_header(MEMRA_C_COMPILER, "c", "-std=c11 -Wall -Wextra -pedantic -Werror");
}

TEST(SdkHeaders, EachCompilesAloneAsStrictCxx20) {
  compile_each_header(MEMRA_CXX_COMPILER, "c++", "-std=c++20 -Wall -Wextra -pedantic -Werror");
}

TEST(SdkHeaders, StrictFlagsReallyRejectABadHeader) {
  // Guards the test above against passing vacuously: the same command fails on a
  // header with a pedantic error.
  TempDir tmp;
  fs::create_directories(tmp.path() / "memra");
  std::ofstream(tmp.path() / "memra" / "bad.h") << "struct empty {};\n";  // empty struct: pedantic error in C
  std::ofstream(tmp.path() / "tu.c") << "#include <memra/bad.h>\n";
  memra::testing::CommandResult r = run(sh_quote(MEMRA_C_COMPILER) + " -x c -std=c11 -Wall -Wextra -pedantic -Werror -fsyntax-only -I" +
                    sh_quote(tmp.path().string()) + " " + sh_quote((tmp.path() / "tu.c").string()));
  EXPECT_NE(r.exit_code, 0) << r.out;
}

}  // namespace
}  // namespace memra::sdk_test
