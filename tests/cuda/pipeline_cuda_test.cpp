// The pipeline backend with its two stages on CUDA devices 0 and 1 (a peer copy between
// GPUs) against one CUDA backend: the same logits bit for bit, every prefill row, then
// greedy decode steps (step graphs unless MEMRA_CUDA_GRAPH=0), on the fixture models and
// a Q4_K_M GGUF. Stages on one GPU, speculative decoding and rolling groups across
// stages are the suites over backends of tests/engine/pipeline_engine_test.cpp and
// pipeline_serving_test.cpp.
// Skips with the reason when there is no driver, GPU or CUDA build, or only one GPU.
#include <gtest/gtest.h>

#include "tests/engine/pipeline_test_run.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"

namespace fs = std::filesystem;
using namespace memra::engine;

namespace {

EngineOptions options(std::vector<int> devices) {
  EngineOptions o = memra::testing::engine_options(MEMRA_BACKEND_CUDA);
  o.max_context = 512;
  o.max_sequences = 4;
  o.pipeline_stages = static_cast<int32_t>(devices.size());
  if (devices.size() > 1) o.pipeline_devices = devices;
  else o.backend.device = devices[0];
  return o;
}

void check_model(const std::string& rel, const std::vector<int>& devices) {
  const fs::path path = memra::testing::fixture(rel);
  if (!fs::exists(path)) GTEST_SKIP() << "fixture " << path << " absent";
  const auto prompt = memra::pipeline_test::test_prompt(24);
  auto one = memra::pipeline_test::make_engine(memra::pipeline_test::open_source(path), options({devices[0]}));
  auto pp = memra::pipeline_test::make_engine(memra::pipeline_test::open_source(path), options(devices));
  ASSERT_TRUE(one && pp);
  std::cout << "[ " << rel << " ] " << pp->backend().describe() << "\n";
  const auto ref = memra::pipeline_test::prefill_and_decode(*one, prompt, 24);
  const auto got = memra::pipeline_test::prefill_and_decode(*pp, prompt, 24);
  EXPECT_EQ(memra::testing::rows_differing(ref, got), "") << rel << " on " << devices.size() << " stages differs from one CUDA backend";
  std::cout << "[ " << rel << " ] hand-offs in the last decode step: " << pp->backend().stats().handoffs << " ("
            << pp->backend().stats().handoff_bytes << " bytes)\n";
}

}  // namespace

TEST(PipelineCuda, TwoDevicesAreBitwiseOneBackend) {
  MEMRA_SKIP_WITHOUT_CUDA();
  if (memra::cuda_test::visible_devices() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, " << memra::cuda_test::visible_devices() << " visible";
  check_model("models/llama", {0, 1});
  check_model("models/qwen3", {0, 1});
  check_model("gguf/llama/llama-Q4_K_M.gguf", {0, 1});
}
