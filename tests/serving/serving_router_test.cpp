// memra-host behind a router (docs/SERVING.md, "Behind a router"): the Model Server
// Protocol metrics of the Gateway API Inference Extension under load (names, types,
// values while requests run and queue), and the Kubernetes manifests in deploy/ read
// with js-yaml (tests/serving/deploy_check.mjs) and checked against a running server:
// the probes' paths answer, the grace period covers the drain, and every metric the
// endpoint picker is told is exported.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "host/server/host_options.hpp"
#include "serving_client.hpp"
#include "tests/support/command.hpp"

namespace memra::server::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

std::string chat(int max_tokens, const std::string& extra = "") {
  return R"({"model":"memra-tiny-random","messages":[{"role":"user","content":"hello there"}],"max_tokens":)" +
         std::to_string(max_tokens) + extra + "}";
}

std::string type_of(const std::string& exposition, const std::string& family) {
  const std::regex line("# TYPE " + family + " ([a-z]+)");
  std::smatch m;
  return std::regex_search(exposition, m, line) ? m[1].str() : "";
}

TEST(ServingRouter, ProtocolMetricsUnderLoad) {
  std::string why;
  // One sequence runs at a time: further requests wait in the scheduler's queue.
  auto host = HostProcess::start(with_tiny_random_model({"--max-running", "1"}), {}, &why);
  ASSERT_TRUE(host) << why;
  const int port = host->port();

  std::string m = scrape(port);
  for (const char* family : {"memra_requests_waiting", "memra_requests_running", "memra_kv_cache_usage_ratio",
                             "memra_cache_config_info"}) {
    EXPECT_EQ(type_of(m, family), "gauge") << family << "\n" << m;
  }
  EXPECT_EQ(sample(m, "memra_requests_waiting"), 0.0);
  EXPECT_EQ(sample(m, "memra_requests_running"), 0.0);
  const double blocks = sample_sum(m, "memra_kv_blocks_used") + sample_sum(m, "memra_kv_blocks_free");
  ASSERT_GT(blocks, 0);
  // The cache config: block size and blocks of the model, value 1.
  const std::regex info(R"(memra_cache_config_info\{([^}]*)\} ([0-9.e+-]+))");
  std::smatch im;
  ASSERT_TRUE(std::regex_search(m, im, info)) << m;
  const std::string labels = im[1];
  EXPECT_EQ(std::stod(im[2]), 1.0);
  EXPECT_NE(labels.find("block_size=\"16\""), std::string::npos) << labels;
  EXPECT_NE(labels.find("num_gpu_blocks=\"" + std::to_string(static_cast<long long>(blocks)) + "\""),
            std::string::npos)
      << labels;
  EXPECT_NE(labels.find("model=\"memra-tiny-random\""), std::string::npos) << labels;

  {
    HeldStream running(port, chat(4000));
    ASSERT_TRUE(running.wait_started()) << host->log();
    // Two more wait behind it (so waiting and running differ).
    auto queued1 = std::async(std::launch::async, [port] { return http(port, post("/v1/chat/completions", chat(2))); });
    auto queued2 = std::async(std::launch::async, [port] { return http(port, post("/v1/chat/completions", chat(2))); });
    bool seen = false;
    for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
      m = scrape(port);
      if (sample(m, "memra_requests_waiting") == 2.0) {
        seen = true;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(seen) << m;
    EXPECT_EQ(sample(m, "memra_requests_running"), 1.0);
    // The totals are the schedulers' gauges summed over models (one model here).
    EXPECT_EQ(sample(m, "memra_requests_waiting"), sample_sum(m, "memra_scheduler_waiting"));
    EXPECT_EQ(sample(m, "memra_requests_running"), sample_sum(m, "memra_scheduler_running"));
    const auto usage = sample(m, "memra_kv_cache_usage_ratio");
    ASSERT_TRUE(usage);
    EXPECT_GT(*usage, 0.0);
    EXPECT_LE(*usage, 1.0);
    EXPECT_DOUBLE_EQ(*usage, sample_sum(m, "memra_kv_blocks_used") /
                                 (sample_sum(m, "memra_kv_blocks_used") + sample_sum(m, "memra_kv_blocks_free")));
    running.release();
    EXPECT_EQ(queued1.get().status, 200);
    EXPECT_EQ(queued2.get().status, 200);
  }
  bool idle = false;
  for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
    m = scrape(port);
    if (sample(m, "memra_requests_running") == 0.0 && sample(m, "memra_requests_waiting") == 0.0) {
      idle = true;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(idle) << m;
}

TEST(ServingRouter, DeployManifestsMatchTheServer) {
  if (!::memra::testing::run_command("node --version >/dev/null 2>&1").ok() ||
      !fs::exists(fs::path(MEMRA_NODE_DIR) / "node_modules/js-yaml/index.js")) {
    GTEST_SKIP() << "node or js-yaml is missing (scripts/setup installs both)";
  }
  const auto r = ::memra::testing::run_command("MEMRA_NODE_DIR='" MEMRA_NODE_DIR "' node '" MEMRA_SOURCE_ROOT
                                               "/tests/serving/deploy_check.mjs' '" MEMRA_SOURCE_ROOT "/deploy'",
                                               ::memra::testing::Stderr::merge);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json facts = json::parse(r.out);
  SCOPED_TRACE(facts.dump(1));
  for (const char* kind : {"Deployment", "Service", "InferencePool"}) {
    EXPECT_NE(std::find(facts["kinds"].begin(), facts["kinds"].end(), kind), facts["kinds"].end()) << kind;
  }
  // The grace period covers the preStop pause, the drain and the ~1 s of cut replies.
  const int drain_ms = facts["drain_timeout_ms"].is_null() ? HostOptions{}.drain_timeout_ms
                                                           : facts["drain_timeout_ms"].get<int>();
  EXPECT_GE(drain_ms, HostOptions{}.drain_timeout_ms);
  EXPECT_GE(facts["grace_seconds"].get<int>() * 1000,
            facts["pre_stop_seconds"].get<int>() * 1000 + drain_ms + 1000);
  // The liveness budget outlasts the drain (/health is 503 while draining).
  EXPECT_GE(facts["liveness"]["period"].get<int>() * facts["liveness"]["failures"].get<int>() * 1000, drain_ms);
  EXPECT_EQ(facts["readiness"]["path"], "/ready");
  EXPECT_EQ(facts["liveness"]["path"], "/health");
  EXPECT_EQ(facts["listen_port"], facts["container_port"]);
  EXPECT_EQ(facts["readiness"]["port"], facts["container_port"]);
  EXPECT_EQ(facts["liveness"]["port"], facts["container_port"]);
  EXPECT_EQ(facts["pool_ports"], json::array({facts["container_port"]}));
  EXPECT_EQ(facts["service_selects"], facts["pod_labels"]);
  EXPECT_EQ(facts["pool_selects"], facts["pod_labels"]);
  EXPECT_TRUE(facts["epp_service"].get<bool>());

  // Against a running server: every probe path answers 200; every metric the picker
  // is told is exported (a gauge), with the labels the picker reads.
  std::string why;
  auto host = HostProcess::start(with_tiny_random_model(), {}, &why);
  ASSERT_TRUE(host) << why;
  for (const char* probe : {"readiness", "liveness", "startup"}) {
    if (facts[probe].is_null()) continue;
    EXPECT_EQ(http(host->port(), get(facts[probe]["path"].get<std::string>())).status, 200) << probe;
  }
  const std::string m = scrape(host->port());
  for (const auto& [flag, value] : facts["epp_metrics"].items()) {
    ASSERT_TRUE(value.is_string()) << flag << " is not given";
    const std::string name = value.get<std::string>().substr(0, value.get<std::string>().find('{'));
    if (flag == "lora-info-metric") {
      EXPECT_EQ(name, "") << "memra serves no LoRA adapters: the picker must not wait for a LoRA metric";
      continue;
    }
    EXPECT_EQ(type_of(m, name), "gauge") << flag << " = " << name << " is not exported as a gauge";
  }
  EXPECT_NE(m.find("block_size=\""), std::string::npos);
}

}  // namespace
}  // namespace memra::server::testing
