// Device sampling (kernels/sampling) on the GPU: memra-kernel-check's sampling checks
// (device token == canonical CPU reference token for every parameter set, bitwise
// memra_exp / Philox, batch invariance), and generation with GPU sampling == with
// host sampling. Skips without a driver/GPU (or the llama fixture).
#include <gtest/gtest.h>

#include <filesystem>

#include "host/engine/drafter.hpp"
#include "host/engine/generate.hpp"

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/support/backends.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/cuda/kernel_check_run.hpp"

TEST(CudaSampling, DeviceTokensEqualTheReference) { memra::cuda_test::run_kernel_checks(memra::kcheck::check_sampling); }

// End to end: generation on the CUDA backend gives the same tokens whether the GPU
// samples (one int32 per row comes back) or the host samples copied rows
// (BackendOptions::device_sampling off, what MEMRA_DEVICE_SAMPLING=0 sets), greedy, seeded with every filter, with penalties, plain
// and through the scheduler-style verify path (generate_speculative, n-gram drafts).
namespace {

std::filesystem::path llama() { return memra::testing::fixture("models/llama"); }

std::unique_ptr<memra::engine::Engine> load_llama(bool device_sampling) {
  memra::engine::EngineOptions eo = memra::testing::engine_options(MEMRA_BACKEND_CUDA);
  eo.backend.device_sampling = device_sampling;
  eo.max_context = 256;
  eo.max_sequences = 4;
  return memra::testing::open_engine(llama(), eo);
}

}  // namespace

TEST(CudaSampling, GenerationTokensEqualHostSampling) {
  MEMRA_SKIP_WITHOUT_CUDA();
  if (!memra::testing::has_reference(llama())) GTEST_SKIP() << "fixture absent: " << llama();
  const auto prompt = memra::testing::reference_prompt(llama());
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
