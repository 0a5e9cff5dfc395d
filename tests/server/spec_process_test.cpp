// Speculative decoding in the real memra-host (CPU backend, the llama fixture):
// the same requests answered with --spec off, with a per-model draft model
// (ALIAS=PATH+DRAFT, the Q8_0 GGUF of the same model) and with --spec ngram give
// the same text and logprobs, greedy and seeded, one choice and three batched;
// usage reports drafted/accepted tokens and /metrics the memra_spec_* series;
// impossible configurations are refused with clear messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "host_process.hpp"
#include "registry_seed.hpp"
#include "http_client.hpp"
#include "tests/support/fixtures.hpp"
#include "tests/support/test_models.hpp"

namespace memra::server::testing {
namespace {

const std::filesystem::path kLlama = memra::testing::fixture("models/llama");
const std::filesystem::path kQ8 = memra::testing::fixture("gguf/llama/llama-Q8_0.gguf");

std::string body(bool seeded, int n) {
  nlohmann::json b = {{"model", "llama"},   {"prompt", "the cat the cat the cat the"}, {"max_tokens", 24},
                      {"logprobs", 1},      {"n", n},                                  {"temperature", seeded ? 0.6 : 0.0}};
  if (seeded) b["seed"] = 1234;
  return b.dump();
}

nlohmann::json complete(HostProcess& h, const std::string& b) {
  const HttpResponse r = http(h.port(), post("/v1/completions", b));
  EXPECT_EQ(r.status, 200) << r.body;
  return nlohmann::json::parse(r.body, nullptr, false);
}

// A streamed completion: the concatenated text of choice 0 and the final usage object.
std::pair<std::string, nlohmann::json> stream(HostProcess& h, bool seeded) {
  auto b = nlohmann::json::parse(body(seeded, 1));
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  const HttpResponse r = http(h.port(), post("/v1/completions", b.dump()));
  EXPECT_EQ(r.status, 200) << r.body;
  std::string text;
  nlohmann::json usage;
  size_t at = 0;
  while ((at = r.body.find("data: ", at)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", at);
    const std::string data = r.body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const auto ev = nlohmann::json::parse(data, nullptr, false);
    if (ev.is_discarded()) continue;
    if (ev.contains("choices") && !ev["choices"].empty()) text += ev["choices"][0].value("text", "");
    if (ev.contains("usage") && ev["usage"].is_object()) usage = ev["usage"];
  }
  return {text, usage};
}

double metric(const std::string& text, const std::string& series) {
  const auto at = text.find(series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 1));
}

#define NEED_FIXTURES()                                                                                \
  do {                                                                                                 \
    if (!std::filesystem::exists(kLlama) || !std::filesystem::exists(kQ8))                             \
      GTEST_SKIP() << "fixtures absent (" << kLlama << ", " << kQ8 << ")";                              \
  } while (0)

TEST(ServerSpec, OutputEqualsPlainAndUsageAndMetricsReportDrafts) {
  NEED_FIXTURES();
  const std::vector<std::string> common = {"--backend", "cpu", "--no-repack"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  std::string why;
  auto plain = HostProcess::start(with({"--model", "llama=" + kLlama.string(), "--spec", "off"}), {}, &why);
  ASSERT_TRUE(plain) << why;
  auto draft = HostProcess::start(with({"--model", "llama=" + kLlama.string() + "+" + kQ8.string(), "--spec-k", "3"}), {}, &why);
  ASSERT_TRUE(draft) << why;
  auto ngram = HostProcess::start(with({"--model", "llama=" + kLlama.string(), "--spec", "ngram", "--spec-k", "5"}), {}, &why);
  ASSERT_TRUE(ngram) << why;
  EXPECT_NE(draft->log().find("speculative decoding with draft model"), std::string::npos) << draft->log();

  int64_t drafted = 0, accepted = 0;
  for (bool seeded : {false, true}) {
    for (int n : {1, 3}) {
      const std::string b = body(seeded, n);
      const auto want = complete(*plain, b);
      EXPECT_FALSE(want["usage"].contains("completion_tokens_details")) << "no speculation, no speculative usage";
      for (HostProcess* h : {draft.get(), ngram.get()}) {
        const auto got = complete(*h, b);
        const std::string what = std::string(h == draft.get() ? "draft" : "ngram") + (seeded ? " seeded" : " greedy") +
                                 " n=" + std::to_string(n);
        ASSERT_EQ(got["choices"].size(), want["choices"].size()) << what;
        for (size_t i = 0; i < want["choices"].size(); ++i) {
          EXPECT_EQ(got["choices"][i]["text"], want["choices"][i]["text"]) << what;
          EXPECT_EQ(got["choices"][i]["logprobs"]["token_logprobs"], want["choices"][i]["logprobs"]["token_logprobs"]) << what;
        }
        EXPECT_EQ(got["usage"]["completion_tokens"], want["usage"]["completion_tokens"]) << what;
        const auto& details = got["usage"]["completion_tokens_details"];
        ASSERT_TRUE(details.is_object()) << what << ": " << got["usage"].dump();
        EXPECT_LE(details["speculative_accepted_tokens"].get<int64_t>(), details["speculative_drafted_tokens"].get<int64_t>());
        if (h == draft.get()) {
          drafted += details["speculative_drafted_tokens"].get<int64_t>();
          accepted += details["speculative_accepted_tokens"].get<int64_t>();
        }
      }
    }
  }
  EXPECT_GT(accepted, 0) << "the draft model never had a draft accepted";

  // Streamed: the same text, several tokens per verify step arriving together.
  for (bool seeded : {false, true}) {
    const auto want = stream(*plain, seeded);
    const auto got = stream(*draft, seeded);
    EXPECT_FALSE(want.first.empty()) << "the stream carried no text";
    EXPECT_EQ(got.first, want.first) << (seeded ? "seeded" : "greedy") << " stream";
    ASSERT_TRUE(got.second.contains("completion_tokens_details")) << got.second.dump();
    drafted += got.second["completion_tokens_details"]["speculative_drafted_tokens"].get<int64_t>();
    accepted += got.second["completion_tokens_details"]["speculative_accepted_tokens"].get<int64_t>();
  }

  const HttpResponse m = http(draft->port(), get("/metrics"));
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(metric(m.body, "memra_spec_drafted_tokens_total{model=\"llama\"}"), static_cast<double>(drafted)) << m.body;
  EXPECT_EQ(metric(m.body, "memra_spec_accepted_tokens_total{model=\"llama\"}"), static_cast<double>(accepted)) << m.body;
  EXPECT_NEAR(metric(m.body, "memra_spec_acceptance_rate{model=\"llama\"}"),
              static_cast<double>(accepted) / static_cast<double>(drafted), 1e-6) << m.body;
  const HttpResponse pm = http(plain->port(), get("/metrics"));
  EXPECT_EQ(metric(pm.body, "memra_spec_drafted_tokens_total{model=\"llama\"}"), 0.0) << "a model without speculation drafts nothing";
  EXPECT_EQ(metric(pm.body, "memra_spec_acceptance_rate{model=\"llama\"}"), 0.0);
}

// --spec mtp: the checkpoint's own MTP head (tests/models/qwen3_5-mtp-tiny, a Qwen3.5 hybrid
// with one MTP layer) drafts; the text and logprobs are --spec off's, greedy and seeded, one
// choice and three batched; usage and /metrics count its drafts.
TEST(ServerSpec, MtpHeadOutputEqualsPlain) {
  const std::filesystem::path model = memra::testing::test_model("qwen3_5-mtp-tiny");
  if (!std::filesystem::exists(model / "model.safetensors")) GTEST_SKIP() << model << " absent";
  const std::vector<std::string> common = {"--backend", "cpu", "--no-repack", "--model", "q35=" + model.string()};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  std::string why;
  auto plain = HostProcess::start(with({"--spec", "off"}), {}, &why);
  ASSERT_TRUE(plain) << why;
  auto mtp = HostProcess::start(with({"--spec", "mtp", "--spec-k", "3"}), {}, &why);
  ASSERT_TRUE(mtp) << why;
  int64_t drafted = 0, accepted = 0;
  for (bool seeded : {false, true})
    for (int n : {1, 3}) {
      auto b = nlohmann::json::parse(body(seeded, n));
      b["model"] = "q35";
      const auto want = complete(*plain, b.dump());
      const auto got = complete(*mtp, b.dump());
      const std::string what = std::string(seeded ? "seeded" : "greedy") + " n=" + std::to_string(n);
      ASSERT_EQ(got["choices"].size(), want["choices"].size()) << what;
      for (size_t i = 0; i < want["choices"].size(); ++i) {
        EXPECT_EQ(got["choices"][i]["text"], want["choices"][i]["text"]) << what;
        EXPECT_EQ(got["choices"][i]["logprobs"]["token_logprobs"], want["choices"][i]["logprobs"]["token_logprobs"]) << what;
      }
      const auto& details = got["usage"]["completion_tokens_details"];
      ASSERT_TRUE(details.is_object()) << what << ": " << got["usage"].dump();
      drafted += details["speculative_drafted_tokens"].get<int64_t>();
      accepted += details["speculative_accepted_tokens"].get<int64_t>();
    }
  EXPECT_GT(drafted, 0);
  EXPECT_LE(accepted, drafted);
  const HttpResponse m = http(mtp->port(), get("/metrics"));
  EXPECT_EQ(metric(m.body, "memra_spec_drafted_tokens_total{model=\"q35\"}"), static_cast<double>(drafted)) << m.body;
}

TEST(ServerSpec, ImpossibleConfigurationsAreRefused) {
  NEED_FIXTURES();
  const std::vector<std::string> base = {"--backend", "cpu", "--no-repack", "--model", "llama=" + kLlama.string()};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_host(args);
  };
  RunResult r = run({"--spec", "mtp"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("has no MTP head"), std::string::npos) << r.err;
  r = run({"--spec", "draft"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("has no draft model"), std::string::npos) << r.err;
  r = run({"--spec", "sometimes"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_NE(r.err.find("off, ngram, draft or mtp"), std::string::npos) << r.err;
  r = run({"--draft", "/nonexistent/draft.gguf"});
  EXPECT_EQ(r.exit_code, 66) << r.err;
  EXPECT_NE(r.err.find("as a draft model"), std::string::npos) << r.err;
}

// The registry gates the drafter too: (llama, bf16, drafter ngram, cpu) marked rejected
// refuses --spec ngram (pointing at --spec off) while the model itself still loads; a
// drafter combo nobody verified needs --allow-generic.
TEST(ServerSpec, TheRegistryGatesTheDrafter) {
  NEED_FIXTURES();
  TempDir dir;
  const std::filesystem::path db = dir.path() / "registry.db";
  auto mark = [&](registry::Verdict v) {
    seed_verdict(db, {"llama", "bf16", "ngram", "cpu"}, v, "set by tests/server/spec_process_test.cpp");
  };
  const std::vector<std::string> base = {"--backend", "cpu", "--no-repack", "--registry", db.string(), "--model",
                                         "llama=" + kLlama.string()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  // Shipped: verified, so it loads.
  std::string why;
  auto ok = HostProcess::start(with({"--spec", "ngram"}), {}, &why);
  ASSERT_TRUE(ok) << why;
  EXPECT_NE(ok->log().find("drafter ngram, arch cpu)"), std::string::npos) << ok->log();
  ok.reset();

  mark(registry::Verdict::rejected);
  RunResult r = run_host(with({"--spec", "ngram"}));
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("drafter ngram, arch cpu) as rejected"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--spec off"), std::string::npos) << r.err;
  auto plain = HostProcess::start(with({"--spec", "off"}), {}, &why);
  EXPECT_TRUE(plain) << "the model without speculation is still verified: " << why;
  plain.reset();

  mark(registry::Verdict::generic);
  r = run_host(with({"--spec", "ngram"}));
  EXPECT_EQ(r.exit_code, 77) << r.err;
  EXPECT_NE(r.err.find("--allow-generic"), std::string::npos) << r.err;
  auto generic = HostProcess::start(with({"--spec", "ngram", "--allow-generic"}), {}, &why);
  EXPECT_TRUE(generic) << why;
}

}  // namespace
}  // namespace memra::server::testing
