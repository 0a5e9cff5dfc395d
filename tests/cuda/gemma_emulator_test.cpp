// family-gemma's op gemma.softcap: its CPU reference (loaded through the plugin host, run as
// the CPU backend runs it) against the formula cap * tanh(x / cap) in double precision, in
// place and out of place, with bad arguments refused; and its CUDA kernel
// (plugins/family-gemma/gemma_kernels.cu), the file itself on the host CTA emulator (no GPU
// needed), bitwise the reference on the cases the plugin gives memra-kernel-check (the
// emulator's tanhf is the host's: on a GPU the kernel-check cases allow 2e-6 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/plugin_host/plugin_host.hpp"
#include "plugins/family-gemma/gemma_ops.hpp"
#include "tests/support/build_plugins.hpp"
#include "tests/cuda/cta_emulator.hpp"  // (last but one: it defines CUDA's keywords as macros)
#include "plugins/family-gemma/gemma_kernels.cu"

namespace {

using memra::plugins::FamilyPlugin;

FamilyPlugin family() {
  auto f = memra::testing::build_plugins().family("gemma");
  if (!f) throw std::runtime_error(f.error().message);
  return *f;
}

const memra_op_def* softcap_op(const FamilyPlugin& f) {
  for (const memra_op_def& d : f.ops())
    if (std::strcmp(d.name, "gemma.softcap") == 0) return &d;
  return nullptr;
}

memra_tensor tensor(float* data, int64_t rows, int64_t cols) {
  memra_tensor t{};
  t.struct_size = MEMRA_TENSOR_STRUCT_SIZE;
  t.dtype = MEMRA_DTYPE_F32;
  t.ndim = 2;
  t.shape[0] = rows, t.shape[1] = cols;
  t.data = data;
  return t;
}

// run_cpu of gemma.softcap on x [rows][cols] into y (y may be x).
memra_status run_softcap(const FamilyPlugin& f, const memra_op_def& op, float cap, float* x, float* y, int64_t rows, int64_t cols,
                         int32_t outputs = 1) {
  memra_tensor in = tensor(x, rows, cols), out = tensor(y, rows, cols);
  const memra_tensor* ins[1] = {&in};
  memra_tensor* outs[1] = {&out};
  const memra::gemma::SoftcapAttrsV1 attrs{sizeof(memra::gemma::SoftcapAttrsV1), cap};
  memra_op_env env{};
  env.struct_size = MEMRA_OP_ENV_STRUCT_SIZE;
  env.backend = MEMRA_BACKEND_CPU;
  memra_op_args args{};
  args.struct_size = MEMRA_OP_ARGS_STRUCT_SIZE;
  args.layer = -1;
  args.attrs_version = 1;
  args.attrs = &attrs;
  args.attrs_size = sizeof attrs;
  args.num_inputs = 1, args.inputs = ins, args.num_outputs = outputs, args.outputs = outs;
  return op.run_cpu(f.ctx(), &env, &args);
}

TEST(GemmaSoftcap, TheReferenceIsTheFormula) {
  const FamilyPlugin f = family();
  const memra_op_def* op = softcap_op(f);
  ASSERT_NE(op, nullptr) << "family-gemma brings no gemma.softcap";
  EXPECT_EQ(op->version, 1u);
  EXPECT_EQ(op->flags, 0u) << "elementwise: no batch, no state";
  for (const float cap : {30.0f, 50.0f, 0.5f}) {
    SCOPED_TRACE("cap " + std::to_string(cap));
    std::vector<float> x;
    for (int i = -400; i <= 400; ++i) x.push_back(static_cast<float>(i) * 0.37f * cap / 30.0f);
    for (const float v : {0.0f, -0.0f, 1e-30f, 1e6f, -1e6f, 3.0e38f, -3.0e38f}) x.push_back(v);
    x.resize((x.size() + 7) / 8 * 8, 1.0f);
    const int64_t rows = static_cast<int64_t>(x.size() / 8);
    std::vector<float> y(x.size(), NAN);
    ASSERT_EQ(run_softcap(f, *op, cap, x.data(), y.data(), rows, 8), MEMRA_OK) << f.last_error();
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = static_cast<double>(cap) * std::tanh(static_cast<double>(x[i]) / static_cast<double>(cap));
      EXPECT_NEAR(y[i], want, 2e-7 * (1.0 + std::fabs(want))) << "x = " << x[i];
      EXPECT_LE(std::fabs(y[i]), cap) << "x = " << x[i];
    }
    // In place: the same bits.
    std::vector<float> z = x;
    ASSERT_EQ(run_softcap(f, *op, cap, z.data(), z.data(), rows, 8), MEMRA_OK) << f.last_error();
    EXPECT_EQ(std::memcmp(z.data(), y.data(), y.size() * 4), 0);
  }
  // Refused: a cap that is not positive, a missing output.
  std::vector<float> x(8, 1.0f), y(8);
  EXPECT_EQ(run_softcap(f, *op, 0.0f, x.data(), y.data(), 1, 8), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(f.last_error().find("cap must be positive"), std::string::npos) << f.last_error();
  EXPECT_EQ(run_softcap(f, *op, -5.0f, x.data(), y.data(), 1, 8), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(run_softcap(f, *op, 5.0f, x.data(), y.data(), 1, 8, 0), MEMRA_ERR_INVALID_ARGUMENT);
}

TEST(GemmaSoftcap, TheKernelIsTheReferenceBitwise) {
  const FamilyPlugin f = family();
  const memra_op_def* op = softcap_op(f);
  ASSERT_NE(op, nullptr);
  ASSERT_NE(op->run_cuda, nullptr);
  ASSERT_NE(op->prepare_cuda, nullptr);
  int32_t cases = 0;
  for (int32_t index = 0;; ++index) {
    memra_op_example e{};
    e.struct_size = MEMRA_OP_EXAMPLE_STRUCT_SIZE;
    if (op->example(f.ctx(), index, &e) == MEMRA_ERR_NOT_FOUND) break;
    ++cases;
    SCOPED_TRACE(e.label);
    ASSERT_EQ(e.num_inputs, 1);
    ASSERT_EQ(e.num_outputs, 1);
    const int64_t rows = e.input_shapes[0], cols = e.input_shapes[1];
    std::vector<float> in(e.inputs[0], e.inputs[0] + rows * cols), cpu(static_cast<size_t>(rows * cols), NAN), emu = cpu;
    const float cap = static_cast<const memra::gemma::SoftcapAttrsV1*>(e.attrs)->cap;
    ASSERT_EQ(run_softcap(f, *op, cap, in.data(), cpu.data(), rows, cols), MEMRA_OK) << f.last_error();
    const long long n = rows * cols;
    // As softcap_cuda launches it: 256 threads a block.
    memra::cuda_emu::launch(static_cast<unsigned>((n + 255) / 256), 1, 256, [&] { gemma_softcap(in.data(), n, cap, emu.data()); }, [] {});
    EXPECT_EQ(std::memcmp(cpu.data(), emu.data(), cpu.size() * 4), 0);
  }
  EXPECT_EQ(cases, 2);
}

}  // namespace
