// Device sampling (kernels/sampling) on the GPU: memra-kernel-check's sampling checks
// (device token == canonical CPU reference token for every parameter set, bitwise
// memra_exp / Philox, batch invariance). Skips without a driver/GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/cuda/cuda_test_env.hpp"

TEST(CudaSampling, DeviceTokensEqualTheReference) {
  const std::string why = memra::cuda_test::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why;
  memra::backend::CudaBackendOpenOptions o;
  o.module_path = memra::cuda_test::module_path();
  auto b = memra::backend::CudaBackendHandle::create(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  memra::kcheck::CheckOptions opts;
  opts.quick = true;
  opts.kernel_dir = memra::cuda_test::kernel_dir();
  memra::kcheck::Device d(&(*b)->api(), (*b)->get());
  memra::kcheck::Report r(nullptr);
  memra::kcheck::check_sampling(d, r, opts);
  ASSERT_FALSE(r.lines().empty());
  for (const auto& l : r.lines()) EXPECT_TRUE(l.pass) << l.name << ": " << l.detail;
}
