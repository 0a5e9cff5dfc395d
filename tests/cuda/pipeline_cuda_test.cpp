// The pipeline backend on CUDA stages against one CUDA backend: the same logits bit
// for bit (every prefill row, then greedy decode steps, which run as step graphs
// unless MEMRA_CUDA_GRAPH=0) on the fixture models, with
//  - two stages on device 0 (two backends, two streams on one GPU: the hand-off is a
//    device-to-device copy ordered by events), and three on a widened model;
//  - two stages on devices 0 and 1 when there are two GPUs (a peer copy);
//  - a Q4_K_M GGUF, and speculative decoding (multi-token verify steps) on 2 stages;
//  - serving with rolling scheduler groups (two groups' steps in flight at once in
//    the stages' two step slots) against plain serving on one backend.
// Skips with the reason when there is no driver, GPU or CUDA build, and the
// two-device case when only one GPU is visible.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "host/engine/generate.hpp"
#include "host/engine/scheduler.hpp"
#include "tests/cuda/cuda_test_env.hpp"
#include "tests/engine/sequence_drain.hpp"
#include "tests/engine/pipeline_test_models.hpp"
#include "tests/engine/pipeline_test_run.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;
using memra::pipeline_test::prefill_and_decode;
using memra::pipeline_test::test_prompt;

namespace {

memra::plugins::PluginHost& plugins() { return memra::cuda_test::build_plugins(); }

#define SKIP_WITHOUT_CUDA()                                                  \
  do {                                                                       \
    const std::string why_ = memra::cuda_test::unavailable_reason();         \
    if (!why_.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why_; \
  } while (0)

// "" when device 1 exists, else why not.
std::string second_device_missing() {
  memra::backend::BackendOptions o = memra::cuda_test::options();
  o.device = 1;
  auto b = memra::backend::open_backend(o);
  return b ? std::string() : b.error().message;
}

fs::path model_path(const std::string& rel) { return memra::cuda_test::fixtures_dir() / rel; }

std::unique_ptr<ModelSource> open_source(const std::string& rel, int64_t widen_to = 0) {
  auto src = open_model_source(model_path(rel).string(), plugins());
  EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  if (widen_to) memra::pipeline_test::widen(**src, widen_to);
  return std::move(*src);
}

std::unique_ptr<Engine> make_engine(std::unique_ptr<ModelSource> src, std::vector<int> devices) {
  EngineOptions o;
  o.backend.kind = MEMRA_BACKEND_CUDA;
  o.backend.module_path = memra::cuda_test::module_path();
  o.backend.kernel_dir = memra::cuda_test::kernel_dir();
  o.max_context = 512;
  o.max_sequences = 4;
  o.pipeline_stages = static_cast<int32_t>(std::max<size_t>(1, devices.size()));
  if (devices.size() > 1) o.pipeline_devices = devices;
  else if (devices.size() == 1) o.backend.device = devices[0];
  auto e = Engine::create(std::move(src), plugins(), o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

// Number of rows that differ in any bit (and the first one), for the message.
std::string compare(const std::vector<std::vector<float>>& ref, const std::vector<std::vector<float>>& got) {
  if (ref.empty() || ref.size() != got.size()) return "row counts differ: " + std::to_string(ref.size()) + " vs " + std::to_string(got.size());
  size_t bad = 0, first = ref.size();
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i].size() != got[i].size() || std::memcmp(ref[i].data(), got[i].data(), ref[i].size() * sizeof(float)) != 0) {
      ++bad;
      first = std::min(first, i);
    }
  return bad == 0 ? "" : std::to_string(bad) + " of " + std::to_string(ref.size()) + " rows differ, first row " + std::to_string(first);
}

void check_model(const std::string& rel, const std::vector<int>& devices, int64_t widen_to = 0) {
  if (!fs::exists(model_path(rel))) GTEST_SKIP() << "fixture " << model_path(rel) << " absent";
  const auto prompt = test_prompt(24);
  auto one = make_engine(open_source(rel, widen_to), {devices[0]});
  auto pp = make_engine(open_source(rel, widen_to), devices);
  ASSERT_TRUE(one && pp);
  std::cout << "[ " << rel << " ] " << pp->backend().describe() << "\n";
  const auto ref = prefill_and_decode(*one, prompt, 24);
  const auto got = prefill_and_decode(*pp, prompt, 24);
  EXPECT_EQ(compare(ref, got), "") << rel << " on " << devices.size() << " stages differs from one CUDA backend";
  std::cout << "[ " << rel << " ] hand-offs in the last decode step: " << pp->backend().stats().handoffs << " ("
            << pp->backend().stats().handoff_bytes << " bytes)\n";
}

}  // namespace

TEST(PipelineCuda, TwoStagesOnOneDeviceAreBitwiseOneBackend) {
  SKIP_WITHOUT_CUDA();
  check_model("models/llama", {0, 0});
  check_model("models/qwen3", {0, 0});
  check_model("gguf/llama/llama-Q4_K_M.gguf", {0, 0});
}

TEST(PipelineCuda, ThreeStagesOnOneDeviceAreBitwiseOneBackend) {
  SKIP_WITHOUT_CUDA();
  check_model("models/qwen3", {0, 0, 0}, 4);
}

TEST(PipelineCuda, TwoDevicesAreBitwiseOneBackend) {
  SKIP_WITHOUT_CUDA();
  if (const std::string why = second_device_missing(); !why.empty()) GTEST_SKIP() << "needs 2 CUDA devices: " << why;
  check_model("models/llama", {0, 1});
  check_model("models/qwen3", {0, 1});
  check_model("gguf/llama/llama-Q4_K_M.gguf", {0, 1});
}

// Verify steps (several tokens of one sequence) cross the stages too.
TEST(PipelineCuda, SpeculativeDecodingAcrossStagesIsTokenIdentical) {
  SKIP_WITHOUT_CUDA();
  if (!fs::exists(model_path("models/llama"))) GTEST_SKIP() << "fixture absent";
  const bool two = second_device_missing().empty();
  auto one = make_engine(open_source("models/llama"), {0});
  auto pp = make_engine(open_source("models/llama"), {0, two ? 1 : 0});
  ASSERT_TRUE(one && pp);
  GenerateOptions g;
  g.max_tokens = 40;
  g.sampling.temperature = 0.0f;
  auto plain = generate(*one, test_prompt(24), g, nullptr, nullptr);
  NgramDrafter drafter;
  SpeculativeOptions s;
  s.drafter = &drafter;
  s.k = 4;
  s.policy.adaptive = false;
  auto spec = generate_speculative(*pp, test_prompt(24), g, s, nullptr);
  ASSERT_TRUE(plain.ok() && spec.ok());
  EXPECT_EQ(spec->tokens, plain->tokens);
  EXPECT_GT(spec->drafted, 0);
}

// Rolling groups: stage 0 runs one group's step while stage 1 runs the other's (slot
// scratch, results waited on per slot). 8 concurrent requests, greedy and seeded,
// chunked prefill, two rounds (the second hits the prefix cache): the tokens (and
// logprobs) one CUDA backend serves one step at a time. Without logprobs the rolling
// steps sample on the last stage's GPU; with them, on the host from copied rows.
TEST(PipelineCuda, RollingGroupsServeOneBackendsTokens) {
  SKIP_WITHOUT_CUDA();
  if (!fs::exists(model_path("models/qwen3"))) GTEST_SKIP() << "fixture absent";
  const bool two = second_device_missing().empty();
  auto serve = [](Engine& e, int32_t groups, bool logprobs) {
    SchedulerOptions so;
    so.max_step_tokens = 40;
    so.max_running = 8;
    so.pipeline_groups = groups;
    Scheduler s(e, so);
    std::vector<test_support::DrainedSequence> out;
    for (int round = 0; round < 2; ++round) {
      std::vector<std::shared_ptr<SequenceHandle>> hs;
      for (int v = 0; v < 8; ++v) {
        SequenceRequest r;
        for (int i = 0; i < 20 + v * 5; ++i) r.prompt.push_back((i * 37 + v * 101) % 1000 + 5);
        r.max_tokens = 24;
        r.sampling.temperature = v % 2 ? 0.8f : 0.0f;
        r.sampling.seed = 7 + static_cast<uint64_t>(v);
        r.sampling.logprobs = logprobs;
        r.cache_namespace = "m\x1ft\x1f";
        auto h = s.submit(std::move(r));
        EXPECT_TRUE(h.ok());
        if (h) hs.push_back(*h);
      }
      for (auto& h : hs) out.push_back(test_support::drain(*h));
    }
    return out;
  };
  auto make = [&](std::vector<int> devices) {
    EngineOptions o;
    o.backend.kind = MEMRA_BACKEND_CUDA;
    o.backend.module_path = memra::cuda_test::module_path();
    o.backend.kernel_dir = memra::cuda_test::kernel_dir();
    o.max_context = 256;
    o.max_sequences = 8;
    o.block_size = 8;
    o.pipeline_stages = static_cast<int32_t>(devices.size());
    if (devices.size() > 1) o.pipeline_devices = devices;
    auto e = Engine::create(open_source("models/qwen3"), plugins(), o);
    EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
    return e ? std::move(*e) : nullptr;
  };
  auto one = make({0});
  auto pp = make({0, two ? 1 : 0});
  ASSERT_TRUE(one && pp);
  for (bool logprobs : {false, true}) {
    const auto ref = serve(*one, 1, logprobs);
    const auto got = serve(*pp, 2, logprobs);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].finish, FinishReason::length) << "request " << i;
      EXPECT_TRUE(got[i] == ref[i]) << "request " << i << " differs with rolling groups on " << (two ? "2 GPUs" : "1 GPU")
                                    << (logprobs ? " (host sampling, logprobs)" : " (device sampling)");
    }
  }
}
