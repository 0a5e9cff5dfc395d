// Pipeline stages in the real memra-host (CPU stages, the llama fixture): --pp 2 with
// the layers split by memory and by --pp-split answers exactly as one backend does
// (text and logprobs, greedy and seeded, three choices batched); bad --pp settings are
// refused with the flag named.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "host/server/host_options.hpp"
#include "host_process.hpp"
#include "http_client.hpp"
#include "tests/support/fixtures.hpp"

namespace memra::server::testing {
namespace {

const std::filesystem::path kLlama = memra::testing::fixture("models/llama");

nlohmann::json complete(HostProcess& h, bool seeded) {
  nlohmann::json b = {{"model", "llama"}, {"prompt", "the cat sat on the"}, {"max_tokens", 16},
                      {"logprobs", 2},    {"n", 3},                         {"temperature", seeded ? 0.7 : 0.0}};
  if (seeded) b["seed"] = 99;
  const HttpResponse r = http(h.port(), post("/v1/completions", b.dump()));
  EXPECT_EQ(r.status, 200) << r.body;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j["choices"];
}

TEST(ServerPipeline, TwoStagesAnswerExactlyAsOneBackend) {
  if (!std::filesystem::exists(kLlama)) GTEST_SKIP() << "fixture absent: " << kLlama;
  const std::vector<std::string> common = {"--backend", "cpu", "--no-repack", "--model", "llama=" + kLlama.string()};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  std::string why;
  auto one = HostProcess::start(with({}), {}, &why);
  ASSERT_TRUE(one) << why;
  auto two = HostProcess::start(with({"--pp", "2"}), {}, &why);
  ASSERT_TRUE(two) << why;
  auto split = HostProcess::start(with({"--pp", "2", "--pp-split", "1"}), {}, &why);
  ASSERT_TRUE(split) << why;
  // The stages are really there (the split is logged at load), and only where asked.
  EXPECT_NE(two->log().find("pipeline stages"), std::string::npos) << two->log();
  EXPECT_NE(split->log().find("pipeline stages"), std::string::npos) << split->log();
  EXPECT_EQ(one->log().find("pipeline stages"), std::string::npos) << one->log();
  for (bool seeded : {false, true}) {
    const nlohmann::json want = complete(*one, seeded);
    ASSERT_TRUE(want.is_array() && want.size() == 3);
    EXPECT_EQ(complete(*two, seeded), want) << (seeded ? "seeded" : "greedy") << ", split by memory";
    EXPECT_EQ(complete(*split, seeded), want) << (seeded ? "seeded" : "greedy") << ", --pp-split 1";
  }
}

TEST(ServerPipeline, BadSettingsNameTheFlag) {
  HostOptions o;
  EXPECT_FALSE(apply_flag(o, "pp", "0"));
  EXPECT_FALSE(apply_flag(o, "pp-split", "4,x"));
  EXPECT_FALSE(apply_flag(o, "pp-devices", "-1"));
  ASSERT_TRUE(apply_flag(o, "pp", "2"));
  ASSERT_TRUE(apply_flag(o, "pp-split", "1,1"));
  ASSERT_TRUE(apply_flag(o, "pp-devices", "0,1"));
  EXPECT_EQ(o.pipeline_stages, 2);
  EXPECT_EQ(o.pp_split, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(o.pp_devices, (std::vector<int>{0, 1}));
  const Status bad = apply_flag(o, "pp-split", "a");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--pp-split"), std::string::npos) << bad.error().message;
  // A split that cannot be applied stops the start of the real binary with the reason.
  if (!std::filesystem::exists(kLlama)) GTEST_SKIP() << "fixture absent: " << kLlama;
  std::string why;
  auto h = HostProcess::start({"--backend", "cpu", "--no-repack", "--model", "llama=" + kLlama.string(), "--pp", "2",
                               "--pp-split", "1,1,1"},
                              {}, &why);
  EXPECT_FALSE(h) << "a 3-stage split for --pp 2 must be refused";
}

}  // namespace
}  // namespace memra::server::testing
