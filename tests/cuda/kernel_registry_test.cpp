// The CUDA backend's kernel registry without a GPU (plain C++): the built-in kernels
// keyed by activation format, the one rule that picks a matmul's activation format
// (ref::matmul_activation, shared with the CPU reference), and the plugin registrar's
// refusals.
#include <gtest/gtest.h>

#include <string>

#include "host/backend/cuda/builtin_kernels.hpp"
#include "host/backend/cuda/kernel_registry.hpp"
#include "kernels/matmul/gemv_int8_ref.hpp"

namespace {

using memra::backend::cuda::KernelEntry;
using memra::backend::cuda::KernelRegistry;
using memra::backend::cuda::register_builtin_kernels;

KernelRegistry builtins(const std::string& arch) {
  KernelRegistry r(arch);
  const auto st = register_builtin_kernels(r);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return r;
}

TEST(KernelRegistry, IntegerSchemesHaveInt8GemvsOnBothArchs) {
  for (const std::string arch : {"sm_90a", "sm_120a"}) {
    const KernelRegistry r = builtins(arch);
    for (const std::string scheme : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs"}) {
      const KernelEntry* e = r.find("matmul", scheme, "int8x32");
      ASSERT_NE(e, nullptr) << scheme << " on " << arch;
      ASSERT_TRUE(e->builtin.has_value());
      EXPECT_TRUE(e->builtin->int8_activations);
      EXPECT_EQ(e->builtin->module, "matmul8_" + scheme);
      EXPECT_EQ(e->key.arch, arch);
      // The f32 GEMV stays for rows that are not whole 256-element runs.
      const KernelEntry* f = r.find("matmul", scheme, "f32");
      ASSERT_NE(f, nullptr);
      EXPECT_FALSE(f->builtin->int8_activations);
      EXPECT_EQ(f->builtin->module, "matmul_" + scheme);
    }
    for (const std::string scheme : {"bf16", "f16", "f32", "fp8"})
      EXPECT_EQ(r.find("matmul", scheme, "int8x32"), nullptr) << scheme << " has no int8 GEMV";
  }
}

TEST(KernelRegistry, ActivationRuleIsTheReferences) {
  using memra::ref::matmul_activation;
  EXPECT_STREQ(matmul_activation("q8_0", 4096), "int8x32");
  EXPECT_STREQ(matmul_activation("q4_0", 256), "int8x32");
  EXPECT_STREQ(matmul_activation("q4_k", 12288), "int8x32");
  for (const char* s : {"q5_k", "q6_k", "iq4_xs"}) {
    EXPECT_STREQ(matmul_activation(s, 256), "int8x32") << s;
    EXPECT_STREQ(matmul_activation(s, 12288), "int8x32") << s;
  }
  EXPECT_STREQ(matmul_activation("q8_0", 800), "f32");  // 25 blocks: not whole 256-element runs
  EXPECT_STREQ(matmul_activation("q4_0", 32), "f32");
  for (int64_t cols : {1000, 4096}) EXPECT_STREQ(matmul_activation("bf16", cols), "bf16");  // every row length
  for (int64_t cols : {128, 4096}) EXPECT_STREQ(matmul_activation("fp8", cols), "bf16");
  for (const char* s : {"f16", "f32", "example_i8"})
    EXPECT_STREQ(matmul_activation(s, 4096), "f32") << s;
  // Every built-in scheme has a kernel for the format the rule picks, for any row length.
  const KernelRegistry r = builtins("sm_90a");
  for (const std::string scheme : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs", "fp8"})
    for (int64_t cols : {256, 768, 4096})
      EXPECT_NE(r.find("matmul", scheme, matmul_activation(scheme, cols)), nullptr) << scheme << " cols " << cols;
  // bf16 and fp8 weights have no f32-activation kernel: never served f32 rows.
  EXPECT_EQ(r.find("matmul", "bf16", "f32"), nullptr);
  EXPECT_EQ(r.find("matmul", "fp8", "f32"), nullptr);
}

memra_status dummy_matmul(memra_plugin_ctx*, const memra_matmul_args*) { return MEMRA_OK; }

TEST(KernelRegistry, PluginKernelsTakeF32ActivationsOnly) {
  KernelRegistry r = builtins("sm_90a");
  memra_device_info device{};
  KernelRegistry::PluginRegistrar reg;
  r.make_registrar(reg, &device, "test-plugin", nullptr);
  memra_kernel_desc d{};
  d.struct_size = MEMRA_KERNEL_DESC_STRUCT_SIZE;
  d.op = "matmul";
  d.scheme = "q8_0";
  d.arch = "sm_90a";
  d.score = 200;
  d.matmul = dummy_matmul;

  d.activation = "int8x32";  // known, but a plugin's matmul gets f32 rows
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_ERR_UNSUPPORTED);
  EXPECT_NE(reg.last_error.find("f32 activations"), std::string::npos) << reg.last_error;
  reg.last_error.clear();
  d.activation = "q8_1";  // unknown
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(reg.last_error.find("int8x32"), std::string::npos) << reg.last_error;
  d.activation = "f32";
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_OK);
  ASSERT_TRUE(reg.commit().ok());
  // The plugin outbids the built-in f32 GEMV; the int8 GEMV is untouched.
  ASSERT_NE(r.find("matmul", "q8_0", "f32"), nullptr);
  EXPECT_TRUE(r.find("matmul", "q8_0", "f32")->plugin.has_value());
  EXPECT_TRUE(r.find("matmul", "q8_0", "int8x32")->builtin.has_value());
}

TEST(KernelRegistry, EntriesForAnotherArchOrFormatAreRefused) {
  KernelRegistry r("sm_90a");
  KernelEntry e;
  e.key = {"matmul", "q8_0", "int8x32", "sm_120a"};
  e.provider = "test";
  e.builtin.emplace();
  EXPECT_FALSE(r.add(e).ok());
  e.key.arch = "sm_90a";
  e.key.activation = "int4";
  EXPECT_FALSE(r.add(e).ok());
  e.key.activation = "bf16";
  EXPECT_TRUE(r.add(e).ok());
  EXPECT_NE(r.find("matmul", "q8_0", "bf16"), nullptr);
  EXPECT_EQ(r.find("matmul", "q8_0", "int8x32"), nullptr);
}

}  // namespace
