// The SDK example quant plugin (sdk/examples/quant-example, scheme example_i8, built out
// of tree against the installed SDK headers by the memra_sdk_example target) serving the
// llama fixture on the CUDA backend through the kernel registry:
//  - memra-repack (repack_checkpoint) quantises the fixture's matrices with the plugin's
//    own quantiser;
//  - greedy decode on the GPU with step graphs on (the default): every step after the
//    first two replays a graph, and the plugin's kernel launches ran inside them;
//  - tokens equal and logits within kCrossBackendBound of the CPU backend running the
//    same plugin's CPU matmul (the kernel is bitwise its CPU reference, example_i8.h;
//    the rest of the step differs as the f32 CUDA vs CPU fixture test states);
//  - a plugin registering its kernel for an arch the device cannot run is refused (one
//    line naming it) and the model load then fails naming the scheme and the arch, while
//    the host goes on to load it correctly.
// Skips with the reason when there is no driver, GPU or CUDA build.
#include <gtest/gtest.h>

#include <cstdlib>

#include "host/engine/engine.hpp"
#include "host/engine/sampler.hpp"
#include "repack/tool/repack.hpp"
#include "tests/support/cuda_env.hpp"
#include "tests/support/fixture_engine.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using memra::engine::Engine;
using memra::engine::StepRequest;

namespace {

// Relative to each row's max |logit|: the CUDA and CPU f32 paths of the other ops
// (norms, attention, the head) differ by ~1e-6 (cuda_fixture_test); the plugin's
// matmul adds nothing (bitwise on both sides).
constexpr double kCrossBackendBound = 1e-4;
constexpr int kDecodeSteps = 16;

std::string g_arch_override;  // the example's "example_i8.arch" config key (test hook)

// $MEMRA_EXAMPLE_PLUGIN_DIR (a carried build), else the build's out-of-tree build dir.
fs::path example_dir() {
  if (const char* p = std::getenv("MEMRA_EXAMPLE_PLUGIN_DIR"); p && *p) return p;
  return fs::path(MEMRA_BINARY_ROOT) / "sdk-example";
}

memra::plugins::PluginHost& host() {
  static memra::plugins::PluginHost* h = [] {
    memra::plugins::PluginHostOptions o;
    o.plugin_dirs = {memra::cuda_test::binary_root() / "lib/memra/plugins", example_dir()};
    o.use_env_path = false;
    o.use_install_dir = false;
    o.services.config = [](std::string_view key) -> std::optional<std::string> {
      if (key == "example_i8.arch" && !g_arch_override.empty()) return g_arch_override;
      return std::nullopt;
    };
    auto* p = new memra::plugins::PluginHost(std::move(o));
    p->discover();
    return p;
  }();
  return *h;
}

memra::Result<std::unique_ptr<Engine>> load(const fs::path& path, memra_backend_kind kind) {
  auto src = memra::engine::open_model_source(path.string(), host());
  if (!src) return src.error();
  memra::engine::EngineOptions o;
  o.backend.kind = kind;
  o.backend.module_path = memra::cuda_test::module_path();
  o.max_context = 256;
  return Engine::create(std::move(*src), host(), o);
}

class CudaPluginKernel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    why_ = memra::cuda_test::unavailable_reason();
    if (!why_.empty()) return;
    const fs::path dir = memra::testing::fixture("models/llama");
    if (!memra::testing::has_reference(dir)) return;
    tmp_ = new memra::testing::TempDir("memra-example-i8");
    out_ = *tmp_ / "llama-example-i8";
    memra::repack::RepackOptions ro;
    ro.plugins = &host();
    ro.source = dir;
    ro.output = out_;
    ro.quant = "example_i8";
    ro.overwrite = true;
    ro.fsync = false;
    auto r = memra::repack::repack_checkpoint(ro);
    repack_error_ = r ? "" : r.error().message;
    if (r)
      for (const auto& t : r->manifest.tensors) plugin_tensors_ += t.scheme == "example_i8";
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
    out_.clear();
  }
  void SetUp() override {
    if (!why_.empty()) GTEST_SKIP() << "CUDA backend unavailable: " << why_;
    if (out_.empty()) GTEST_SKIP() << "fixture models/llama absent";
    ASSERT_EQ(repack_error_, "");
    ASSERT_TRUE(host().quant("example-i8").ok()) << "example plugin not found in " << example_dir();
    g_arch_override.clear();
  }
  static inline std::string why_, repack_error_;
  static inline memra::testing::TempDir* tmp_ = nullptr;
  static inline fs::path out_;
  static inline int plugin_tensors_ = 0;
};

TEST_F(CudaPluginKernel, ServesGreedyDecodeInsideReplayedStepGraphs) {
  ASSERT_GT(plugin_tensors_, 0) << "the repack wrote no example_i8 tensor";
  auto gpu = load(out_, MEMRA_BACKEND_CUDA);
  ASSERT_TRUE(gpu.ok()) << gpu.error().message;
  auto cpu = load(out_, MEMRA_BACKEND_CPU);
  ASSERT_TRUE(cpu.ok()) << cpu.error().message;
  const std::vector<int32_t> input = memra::testing::reference_prompt(memra::testing::fixture("models/llama"));

  const int32_t gs = (*gpu)->open_sequence(), cs = (*cpu)->open_sequence();
  StepRequest g{gs, input, false, true}, c{cs, input, false, true};
  auto go = (*gpu)->step({&g, 1});
  auto co = (*cpu)->step({&c, 1});
  ASSERT_TRUE(go.ok()) << go.error().message;
  ASSERT_TRUE(co.ok()) << co.error().message;
  std::vector<float> glast = go->back(), clast = co->back();
  double worst = memra::testing::max_rel_diff(glast, clast);
  std::vector<int32_t> gtok, ctok;
  for (int s = 0; s < kDecodeSteps; ++s) {
    gtok.push_back(memra::engine::argmax(glast));
    ctok.push_back(memra::engine::argmax(clast));
    ASSERT_EQ(gtok.back(), ctok.back()) << "greedy token " << s << " differs";
    StepRequest gd{gs, {&gtok.back(), 1}, false}, cd{cs, {&ctok.back(), 1}, false};
    auto o1 = (*gpu)->step({&gd, 1});
    auto o2 = (*cpu)->step({&cd, 1});
    ASSERT_TRUE(o1.ok()) << o1.error().message;
    ASSERT_TRUE(o2.ok()) << o2.error().message;
    glast = (*o1)[0];
    clast = (*o2)[0];
    worst = std::max(worst, memra::testing::max_rel_diff(glast, clast));
  }
  const memra::backend::BackendStats st = (*gpu)->backend().stats();
  std::cout << "[ example_i8 ] " << plugin_tensors_ << " plugin tensors; " << kDecodeSteps << " decode steps: graph replays "
            << st.graph_replays << ", captures " << st.graph_captures << "; plugin matmuls " << st.plugin_matmuls
            << ", plugin launches replayed " << st.plugin_launches_replayed << ", captured " << st.plugin_launches_captured
            << ", eager " << st.plugin_launches_eager << "; max rel diff vs CPU backend " << worst << "\n";
  EXPECT_LE(worst, kCrossBackendBound);
  // Decode steps at fixed shapes replay; the prefill ran eagerly (its shapes are one-off).
  EXPECT_GE(st.graph_replays, kDecodeSteps - 2);
  // Every replayed step ran the plugin's launches inside its graph.
  EXPECT_GE(st.plugin_launches_replayed, st.graph_replays * plugin_tensors_ / 2);
  EXPECT_GT(st.plugin_launches_replayed, 0);
}

TEST_F(CudaPluginKernel, KernelForAnArchTheDeviceCannotRunIsRefusedAndTheHostGoesOn) {
  auto probe = memra::backend::open_backend(memra::cuda_test::options());
  ASSERT_TRUE(probe.ok()) << probe.error().message;
  const std::string arch = (*probe)->device_info().arch;
  probe->reset();
  g_arch_override = arch == "sm_90a" ? "sm_120a" : "sm_90a";
  auto bad = load(out_, MEMRA_BACKEND_CUDA);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("no matmul kernel is registered for weight scheme 'example_i8' (activations f32) on " + arch),
            std::string::npos)
      << bad.error().message;
  g_arch_override.clear();
  auto good = load(out_, MEMRA_BACKEND_CUDA);
  EXPECT_TRUE(good.ok()) << good.error().message;
}

}  // namespace
