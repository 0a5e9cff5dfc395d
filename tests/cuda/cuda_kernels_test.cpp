// memra-kernel-check's checks as tests (quick shapes): every kernel within its
// bound of the CPU reference, the batch-invariance bit checks, kernel services,
// NVRTC cache and the architecture gate. Skips without a driver/GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/cuda/cuda_test_env.hpp"

namespace {

using memra::kcheck::CheckOptions;
using memra::kcheck::Device;
using memra::kcheck::Report;

void run(void (*fn)(Device&, Report&, const CheckOptions&)) {
  const std::string why = memra::cuda_test::unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why;
  memra::backend::CudaBackendOpenOptions o;
  o.module_path = memra::cuda_test::module_path();
  auto b = memra::backend::CudaBackendHandle::create(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  CheckOptions opts;
  opts.quick = true;
  opts.kernel_dir = memra::cuda_test::kernel_dir();
  opts.temp_dir = (std::filesystem::temp_directory_path() / ("memra-cuda-test-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(opts.temp_dir);
  Device d(&(*b)->api(), (*b)->get());
  Report r(nullptr);
  fn(d, r, opts);
  std::error_code ec;
  std::filesystem::remove_all(opts.temp_dir, ec);
  ASSERT_FALSE(r.lines().empty());
  for (const auto& l : r.lines()) EXPECT_TRUE(l.pass) << l.name << ": " << l.detail;
  std::cout << "[ checks ] " << r.lines().size() << " lines\n";
}

}  // namespace

TEST(CudaKernels, EmbeddingAndGatherBitwise) { run(memra::kcheck::check_embedding_gather); }
TEST(CudaKernels, NormsActivationsAdd) { run(memra::kcheck::check_elementwise); }
TEST(CudaKernels, MatmulEverySchemeAndBatchInvariance) { run(memra::kcheck::check_matmul); }
TEST(CudaKernels, AttentionRopeAndBatchInvariance) { run(memra::kcheck::check_attention); }
TEST(CudaKernels, KernelServicesNvrtcCacheArchGate) { run(memra::kcheck::check_services); }
