// One suite, every backend: a property the engine must have on the CPU reference and
// on CUDA is one parameterised suite (TEST_P) over memra_backend_kind, instantiated with
// MEMRA_INSTANTIATE_BACKENDS(Suite). Its CUDA instances are named ".../cuda" (the CPU
// ones ".../cpu") and skip with the reason where the CUDA backend cannot run (no
// driver, no GPU, no CUDA build), so the suite builds and passes everywhere;
// tests/cuda/all_on_device.sh runs the "*/cuda*" instances on the GPU machine.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/engine/engine.hpp"
#include "tests/support/cuda_env.hpp"

namespace memra::testing {

inline const char* backend_name(memra_backend_kind kind) { return kind == MEMRA_BACKEND_CUDA ? "cuda" : "cpu"; }

// "" when a backend of `kind` can run here, else why not.
inline std::string backend_unavailable(memra_backend_kind kind) {
  return kind == MEMRA_BACKEND_CUDA ? cuda_test::unavailable_reason() : std::string();
}

// This build's backend of `kind` (CUDA: the build's module and kernels, device 0).
inline backend::BackendOptions backend_options(memra_backend_kind kind) {
  return kind == MEMRA_BACKEND_CUDA ? cuda_test::options() : backend::BackendOptions{};
}

// Engine options on that backend, everything else default.
inline engine::EngineOptions engine_options(memra_backend_kind kind) {
  engine::EngineOptions eo;
  eo.backend = backend_options(kind);
  return eo;
}

// Where a pipeline's CUDA stages go: all on the backend's device (two backends and
// streams on one GPU), or spread over the visible GPUs (one per GPU while there are
// enough, then round again; a one-GPU machine puts them all on device 0).
enum class StageDevices { same, spread };

// `stages` pipeline stages of the options' backend kind.
inline void set_pipeline_stages(engine::EngineOptions& eo, int32_t stages, StageDevices where = StageDevices::same) {
  eo.pipeline_stages = stages;
  eo.pipeline_devices.clear();
  if (eo.backend.kind != MEMRA_BACKEND_CUDA || stages < 2) return;
  const int gpus = where == StageDevices::spread ? std::max(1, cuda_test::visible_devices()) : 1;
  for (int32_t s = 0; s < stages; ++s) eo.pipeline_devices.push_back(where == StageDevices::spread ? s % gpus : eo.backend.device);
}

inline const std::vector<memra_backend_kind>& all_backends() {
  static const std::vector<memra_backend_kind> kinds = {MEMRA_BACKEND_CPU, MEMRA_BACKEND_CUDA};
  return kinds;
}

// gtest's name for a backend instance: "cpu" / "cuda".
struct BackendName {
  std::string operator()(const ::testing::TestParamInfo<memra_backend_kind>& info) const { return backend_name(info.param); }
};

// A suite over backends (GetParam() is the kind): skips, with the reason, where the
// backend cannot run.
class BackendTest : public ::testing::TestWithParam<memra_backend_kind> {
 protected:
  void SetUp() override {
    if (const std::string why = backend_unavailable(GetParam()); !why.empty())
      GTEST_SKIP() << backend_name(GetParam()) << " backend unavailable: " << why;
  }
};

}  // namespace memra::testing

// In a test body whose parameter holds a backend kind (suites with more than one
// parameter): skip, with the reason, where that backend cannot run.
#define MEMRA_SKIP_UNLESS_BACKEND(kind)                                                              \
  do {                                                                                               \
    const std::string why_ = memra::testing::backend_unavailable(kind);                              \
    if (!why_.empty()) GTEST_SKIP() << memra::testing::backend_name(kind) << " backend unavailable: " << why_; \
  } while (0)

#define MEMRA_INSTANTIATE_BACKENDS(suite) \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(memra::testing::all_backends()), memra::testing::BackendName())
