// Device sampling (kernels/sampling) on the GPU: memra-kernel-check's sampling checks
// (device token == canonical CPU reference token for every parameter set, bitwise
// memra_exp / Philox, batch invariance), and generation with GPU sampling == with
// host sampling. Skips without a driver/GPU (or the llama fixture).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "host/engine/drafter.hpp"
#include "host/engine/generate.hpp"

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/cuda/cuda_test_env.hpp"
#include "tests/cuda/kernel_check_run.hpp"

TEST(CudaSampling, DeviceTokensEqualTheReference) { memra::cuda_test::run_kernel_checks(memra::kcheck::check_sampling); }

// End to end: generation on the CUDA backend gives the same tokens whether the GPU
// samples (one int32 per row comes back) or the host samples copied rows
// (MEMRA_DEVICE_SAMPLING=0), greedy, seeded with every filter, with penalties, plain
// and through the scheduler-style verify path (generate_speculative, n-gram drafts).
namespace {

std::unique_ptr<memra::engine::Engine> load_llama(bool device_sampling) {
  const auto dir = memra::cuda_test::fixtures_dir() / "models/llama";
  auto src = memra::engine::open_model_source(dir.string(), memra::cuda_test::build_plugins());
  EXPECT_TRUE(src.ok()) << (src.ok() ? "" : src.error().message);
  if (!src) return nullptr;
  memra::engine::EngineOptions eo;
  eo.backend.kind = MEMRA_BACKEND_CUDA;
  eo.backend.module_path = memra::cuda_test::module_path();
  eo.max_context = 256;
  eo.max_sequences = 4;
  if (!device_sampling) ::setenv("MEMRA_DEVICE_SAMPLING", "0", 1);
  auto e = memra::engine::Engine::create(std::move(*src), memra::cuda_test::build_plugins(), eo);
  ::unsetenv("MEMRA_DEVICE_SAMPLING");
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e ? std::move(*e) : nullptr;
}

}  // namespace

TEST(CudaSampling, GenerationTokensEqualHostSampling) {
  const std::string why = memra::cuda_test::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why;
  const auto dir = memra::cuda_test::fixtures_dir() / "models/llama";
  if (!std::filesystem::exists(dir / "reference.json")) GTEST_SKIP() << "fixture absent: " << dir;
  const auto prompt = nlohmann::json::parse(std::ifstream(dir / "reference.json"))["input_ids"].get<std::vector<int32_t>>();
  auto device = load_llama(true), host = load_llama(false);
  ASSERT_TRUE(device && host);
  EXPECT_TRUE(device->samples_on_device());
  EXPECT_FALSE(host->samples_on_device());
  std::vector<memra::engine::SamplingParams> sets(4);
  sets[0].temperature = 0.0f;
  sets[1].temperature = 0.8f, sets[1].top_k = 40, sets[1].top_p = 0.9f, sets[1].min_p = 0.02f, sets[1].seed = 7;
  sets[2].temperature = 1.2f, sets[2].repetition_penalty = 1.3f, sets[2].frequency_penalty = 0.4f, sets[2].seed = 11;
  sets[3].temperature = 1.0f, sets[3].seed = 3, sets[3].logprobs = true, sets[3].top_logprobs = 3;
  for (size_t i = 0; i < sets.size(); ++i) {
    memra::engine::GenerateOptions g;
    g.sampling = sets[i];
    g.max_tokens = 24;
    auto a = memra::engine::generate(*device, prompt, g, nullptr, nullptr);
    auto b = memra::engine::generate(*host, prompt, g, nullptr, nullptr);
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error().message : a.error().message);
    EXPECT_EQ(a->tokens, b->tokens) << "parameter set " << i;
    memra::engine::NgramDrafter drafter;
    memra::engine::SpeculativeOptions so;
    so.drafter = &drafter;
    so.k = 4;
    auto c = memra::engine::generate_speculative(*device, prompt, g, so, nullptr);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_EQ(c->tokens, a->tokens) << "speculative, parameter set " << i;
  }
}
