// One memra-kernel-check family (host/tools/memra-kernel-check/checks.hpp) as a
// GoogleTest: quick shapes on CUDA device 0, every line must pass. Skips with the
// reason without a driver, GPU or CUDA build.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "host/tools/memra-kernel-check/checks.hpp"
#include "tests/support/cuda_env.hpp"
#include "tests/support/temp_dir.hpp"

namespace memra::cuda_test {

inline void run_kernel_checks(void (*fn)(kcheck::Device&, kcheck::Report&, const kcheck::CheckOptions&)) {
  MEMRA_SKIP_WITHOUT_CUDA();
  backend::BackendOptions o = options();
  o.apply_environment();
  auto b = backend::open_backend(o);
  ASSERT_TRUE(b.ok()) << b.error().message;
  kcheck::CheckOptions opts;
  opts.quick = true;
  opts.kernel_dir = kernel_dir();
  const memra::testing::TempDir tmp("memra-kernel-check");
  opts.temp_dir = tmp.path().string();
  kcheck::Device d(std::move(*b), o);
  kcheck::Report r(nullptr);
  fn(d, r, opts);
  ASSERT_FALSE(r.lines().empty());
  for (const auto& l : r.lines()) EXPECT_TRUE(l.pass) << l.name << ": " << l.detail;
  std::cout << "[ checks ] " << r.lines().size() << " lines\n";
}

}  // namespace memra::cuda_test
