// One memra-kernel-check family (host/tools/memra-kernel-check/checks.hpp) as a
// GoogleTest: quick shapes on CUDA device 0, every line must pass. Skips with the
// reason without a driver, GPU or CUDA build.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/cuda/cuda_test_env.hpp"

namespace memra::cuda_test {

inline void run_kernel_checks(void (*fn)(kcheck::Device&, kcheck::Report&, const kcheck::CheckOptions&)) {
  const std::string why = unavailable_reason();
  if (!why.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why;
  backend::BackendOptions o = options();
  o.apply_environment();
  auto b = backend::open_backend(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  kcheck::CheckOptions opts;
  opts.quick = true;
  opts.kernel_dir = kernel_dir();
  opts.temp_dir = (std::filesystem::temp_directory_path() / ("memra-cuda-test-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(opts.temp_dir);
  kcheck::Device d(std::move(*b), o);
  kcheck::Report r(nullptr);
  fn(d, r, opts);
  std::error_code ec;
  std::filesystem::remove_all(opts.temp_dir, ec);
  ASSERT_FALSE(r.lines().empty());
  for (const auto& l : r.lines()) EXPECT_TRUE(l.pass) << l.name << ": " << l.detail;
  std::cout << "[ checks ] " << r.lines().size() << " lines\n";
}

}  // namespace memra::cuda_test
