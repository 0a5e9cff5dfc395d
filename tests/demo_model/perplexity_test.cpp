// memra-perplexity: its arithmetic against independent computations, the tool against
// transformers' perplexity of the demo model on the held-out text (the same windows,
// tests/demo_model/perplexity_reference.json, made by scripts/demo_model/hf_perplexity.py),
// and bad input refused with a message and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "host/tokenizer/utf8.hpp"
#include "host/tools/memra-perplexity/perplexity.hpp"
#include "tests/support/command.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
namespace ppl = memra::perplexity;

namespace {

const fs::path kModel = fs::path(MEMRA_SOURCE_ROOT) / "host/default_model";
const fs::path kHeldout = fs::path(MEMRA_SOURCE_ROOT) / "scripts/demo_model/heldout.txt";
const fs::path kReference = fs::path(MEMRA_SOURCE_ROOT) / "tests/demo_model/perplexity_reference.json";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs memra-perplexity with `args` (already shell-quoted where needed).
memra::testing::CommandResult run_tool(const std::string& args) {
  return memra::testing::run_command(std::string(MEMRA_PERPLEXITY_BIN) + " " + args, memra::testing::Stderr::capture);
}

// A text file holding `bytes` (in its own temp dir, removed with it).
class TempFile {
 public:
  explicit TempFile(const std::string& bytes) : path_(dir_.write("text.txt", bytes)) {}
  std::string str() const { return path_.string(); }

 private:
  memra::testing::TempDir dir_{"memra-ppl"};
  fs::path path_;
};

// ---- the arithmetic ------------------------------------------------------------------

// For every (tokens, ctx, stride, chunks): windows lie inside the text, start every
// stride tokens from 0, and their scored tokens [start + ctx - stride, start + ctx) tile
// one contiguous run without overlap; one more window would not fit (or pass --chunks).
TEST(PerplexityWindows, ScoredTokensTileTheTextOnce) {
  for (int64_t n : {0, 1, 7, 8, 9, 100, 1000}) {
    for (int64_t ctx : {2, 3, 8, 64}) {
      for (int64_t stride = 1; stride < ctx; stride += std::max<int64_t>(1, ctx / 5)) {
        for (int64_t chunks : {0, 1, 3}) {
          const auto w = ppl::window_starts(n, ctx, stride, chunks);
          if (n < ctx) {
            EXPECT_TRUE(w.empty());
            continue;
          }
          ASSERT_FALSE(w.empty()) << n << " " << ctx << " " << stride;
          int64_t next_scored = ctx - stride;
          for (size_t k = 0; k < w.size(); ++k) {
            EXPECT_EQ(w[k], static_cast<int64_t>(k) * stride);
            EXPECT_LE(w[k] + ctx, n);
            EXPECT_EQ(w[k] + ctx - stride, next_scored);
            next_scored = w[k] + ctx;
          }
          const bool capped = chunks > 0 && static_cast<int64_t>(w.size()) == chunks;
          if (!capped) {
            EXPECT_GT(w.back() + stride + ctx, n) << "a further window would have fit";
          }
        }
      }
    }
  }
  EXPECT_TRUE(ppl::window_starts(100, 8, 8, 0).empty());  // stride must be below ctx
  EXPECT_TRUE(ppl::window_starts(100, 8, 0, 0).empty());
}

// token_nll against log-softmax in long double, directly from the definition.
TEST(PerplexityArithmetic, TokenNllIsMinusLogSoftmax) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 8.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> row(4096);
    for (float& v : row) v = d(rng);
    const int32_t target = static_cast<int32_t>(rng() % row.size());
    long double z = 0;
    for (float v : row) z += std::exp(static_cast<long double>(v));
    const long double want = std::log(z) - static_cast<long double>(row[target]);
    EXPECT_NEAR(ppl::token_nll(row, target), static_cast<double>(want), 1e-9 * std::fabs(static_cast<double>(want)) + 1e-12);
  }
  std::vector<float> big = {1000.0f, 0.0f, -1000.0f};  // no overflow: reduced from the maximum
  EXPECT_NEAR(ppl::token_nll(big, 0), 0.0, 1e-12);
  EXPECT_NEAR(ppl::token_nll(big, 1), 1000.0, 1e-9);
}

// PPL and its uncertainty against the formulas computed here in two passes.
TEST(PerplexityArithmetic, StatsAreLlamaCppsFormula) {
  std::mt19937 rng(3);
  std::gamma_distribution<double> d(2.0, 1.5);
  ppl::NllStats s;
  std::vector<double> v(5000);
  for (double& x : v) s.add(x = d(rng));
  double mean = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
  EXPECT_EQ(s.count(), 5000);
  EXPECT_NEAR(s.mean(), mean, 1e-12 * mean);
  EXPECT_NEAR(s.ppl(), std::exp(mean), 1e-9 * std::exp(mean));
  const double err = std::exp(mean) * std::sqrt(var / (static_cast<double>(v.size()) - 1));
  EXPECT_NEAR(s.ppl_error(), err, 1e-7 * err);
}

TEST(PerplexityUtf8, FindsTheFirstIllFormedByte) {
  EXPECT_EQ(ppl::first_invalid_utf8("plain ASCII\n"), std::nullopt);
  EXPECT_EQ(ppl::first_invalid_utf8("caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x9A\x80 \xF4\x8F\xBF\xBF"), std::nullopt);
  EXPECT_EQ(ppl::first_invalid_utf8("ab\xFF"), 2u);               // never a UTF-8 byte
  EXPECT_EQ(ppl::first_invalid_utf8("x\x80y"), 1u);               // lone continuation
  EXPECT_EQ(ppl::first_invalid_utf8("\xC0\x80"), 0u);             // overlong NUL
  EXPECT_EQ(ppl::first_invalid_utf8("ok\xE0\x9F\xBF"), 2u);       // overlong 3-byte
  EXPECT_EQ(ppl::first_invalid_utf8("\xED\xA0\x80"), 0u);         // a surrogate
  EXPECT_EQ(ppl::first_invalid_utf8("\xF4\x90\x80\x80"), 0u);     // past U+10FFFF
  EXPECT_EQ(ppl::first_invalid_utf8("end \xE2\x82"), 4u);         // truncated at the end
  EXPECT_EQ(ppl::first_invalid_utf8("\xE2\x82z"), 0u);            // truncated in the middle
}

// Agrees with the tokenizer's own validator (an independent implementation) on random bytes.
TEST(PerplexityUtf8, AgreesWithTheTokenizersValidator) {
  std::mt19937 rng(11);
  const std::string pieces[] = {"a", " ", "\xC3\xA9", "\xE2\x80\x94", "\xF0\x9F\x9A\x80", "\x80", "\xC3", "\xED\xA0\x80", "\xF4\x90", "\xFF"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s;
    for (int k = 0, n = static_cast<int>(rng() % 8); k < n; ++k) s += pieces[rng() % 10];
    EXPECT_EQ(!ppl::first_invalid_utf8(s).has_value(), memra::tokenizer::detail::is_valid_utf8(s)) << s;
  }
}

// ---- the tool --------------------------------------------------------------------------

// The demo model on the held-out text, 16 windows of 128 every 64 tokens, against
// transformers' float32 figure for the same windows. memra's bf16 weights compute on
// bf16-rounded activations (numeric contract v2), transformers' on float32 ones; the
// logits agree to ~3e-3 of their scale (demo_model_test) and the mean NLL moves by
// 1.2e-4 (measured): bound 1e-3 (0.1 % of the perplexity), the standard error of the
// perplexity within 1 %.
TEST(MemraPerplexity, MatchesTransformersOnTheHeldOutText) {
  const auto ref = nlohmann::json::parse(std::ifstream(kReference));
  nlohmann::json want;
  for (const auto& f : ref["figures"]["memra-demo"])
    if (f["ctx"] == 128 && f["stride"] == 64 && f["chunks"] == 16 && f["dtype"] == "float32") want = f;
  ASSERT_FALSE(want.is_null());
  const memra::testing::CommandResult r = run_tool(kModel.string() + " " + kHeldout.string() + " --ctx 128 --stride 64 --chunks 16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto got = nlohmann::json::parse(r.out);
  EXPECT_EQ(got["tokens"], want["tokens"]) << "memra's tokenizer splits the text differently from transformers'";
  EXPECT_EQ(got["windows"], want["windows"]);
  EXPECT_EQ(got["scored"], want["scored"]);
  EXPECT_NEAR(got["nll_mean"].get<double>(), want["nll_mean"].get<double>(), 1e-3);
  EXPECT_NEAR(got["ppl_err"].get<double>(), want["ppl_err"].get<double>(), 1e-2 * want["ppl_err"].get<double>());
  std::cout << "memra PPL " << got["ppl"] << " +/- " << got["ppl_err"] << ", transformers " << want["ppl"] << "\n";
  // Progress went to stderr, one line per window here (16 windows < 50).
  EXPECT_NE(r.err.find("[16/16] PPL"), std::string::npos) << r.err;
}

TEST(MemraPerplexity, PlainOutputIsThePplLine) {
  const std::string text = slurp(kHeldout).substr(0, 1200);
  TempFile f(text);
  const memra::testing::CommandResult r = run_tool(kModel.string() + " " + f.str() + " --ctx 32");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^PPL = [0-9]+\.[0-9]{4} \+/- [0-9]+\.[0-9]{4} \([0-9]+ tokens scored in [0-9]+ windows of 32, stride 16\)\n$)")))
      << r.out;
}

TEST(MemraPerplexity, AFileShorterThanOneContextIsRefused) {
  TempFile f("Call me Ishmael. Some years ago, never mind how long precisely.\n");
  memra::testing::CommandResult r = run_tool(kModel.string() + " " + f.str());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("fewer than one context of 512"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  TempFile empty("");
  r = run_tool(kModel.string() + " " + empty.str() + " --ctx 16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has 0 tokens, fewer than one context of 16"), std::string::npos) << r.err;
}

TEST(MemraPerplexity, TextThatIsNotUtf8IsRefused) {
  TempFile f(std::string(2000, 'a') + "\xC3\x28" + std::string(2000, 'b'));
  const memra::testing::CommandResult r = run_tool(kModel.string() + " " + f.str() + " --ctx 16");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not UTF-8 text: byte 0xC3 at offset 2000"), std::string::npos) << r.err;
}

TEST(MemraPerplexity, MissingFilesAndBadModelsAreRefused) {
  memra::testing::CommandResult r = run_tool(kModel.string() + " /nonexistent/text.txt");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot read /nonexistent/text.txt: no such file"), std::string::npos) << r.err;
  r = run_tool("/nonexistent/model " + kHeldout.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  r = run_tool(kModel.string() + " " + kHeldout.string() + " --ctx 2048");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("beyond the model's 1024 positions"), std::string::npos) << r.err;
}

TEST(MemraPerplexity, UsageErrorsExit2) {
  const std::string m = kModel.string() + " " + kHeldout.string();
  for (const std::string& args : {std::string(""), kModel.string(), m + " --ctx", m + " --ctx abc", m + " --ctx 1",
                                  m + " --ctx 64 --stride 64", m + " --stride 0", m + " --chunks -1",
                                  m + " --backend tpu", m + " --kv-dtype fp16", m + " --bogus", m + " extra"}) {
    const memra::testing::CommandResult r = run_tool(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("usage: memra-perplexity"), std::string::npos) << args;
  }
}

// --help and docs/FLAGS.md's memra-perplexity section name the same flags.
TEST(MemraPerplexity, HelpAndFlagsMdAgree) {
  const memra::testing::CommandResult r = run_tool("--help");
  ASSERT_EQ(r.exit_code, 0);
  const std::string md = slurp(fs::path(MEMRA_SOURCE_ROOT) / "docs/FLAGS.md");
  const auto begin = md.find("## memra-perplexity");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = md.substr(begin, md.find("\n## ", begin + 1) - begin);
  auto flags = [](const std::string& text) {
    std::set<std::string> out;
    const std::regex flag(R"(--[a-z][a-z-]*)");
    for (std::sregex_iterator it(text.begin(), text.end(), flag), end; it != end; ++it) out.insert(it->str());
    return out;
  };
  std::set<std::string> help = flags(r.out);
  help.erase("--ppl-stride");  // llama.cpp's flag, named for comparison
  std::set<std::string> doc = flags(section);
  doc.erase("--ppl-stride");
  EXPECT_EQ(help, doc);
}

}  // namespace
