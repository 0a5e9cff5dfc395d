// memra-kernel-check's checks as tests (quick shapes): every kernel within its
// bound of the CPU reference, the batch-invariance bit checks, kernel services,
// NVRTC cache and the architecture gate. Skips without a driver/GPU.
#include <gtest/gtest.h>

#include "tests/cuda/kernel_check_run.hpp"

using memra::cuda_test::run_kernel_checks;

TEST(CudaKernels, EmbeddingAndGatherBitwise) { run_kernel_checks(memra::kcheck::check_embedding_gather); }
TEST(CudaKernels, NormsActivationsAdd) { run_kernel_checks(memra::kcheck::check_elementwise); }
TEST(CudaKernels, MatmulEverySchemeAndBatchInvariance) { run_kernel_checks(memra::kcheck::check_matmul); }
TEST(CudaKernels, Fp8GemvPreparedActivationsBitwise) { run_kernel_checks(memra::kcheck::check_fp8_gemv); }
TEST(CudaKernels, AttentionRopeAndBatchInvariance) { run_kernel_checks(memra::kcheck::check_attention); }
TEST(CudaKernels, KernelServicesNvrtcCacheArchGate) { run_kernel_checks(memra::kcheck::check_services); }
