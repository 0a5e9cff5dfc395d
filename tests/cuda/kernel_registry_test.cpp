// The CUDA backend's kernel registry without a GPU (plain C++): the build's quant plugins
// register their schemes' device kernels (memra_matmul_kernels, SDK 2.10) through host
// services bound to a fake backend, the lookup by row length picks what the backend
// will launch, and the registrar refuses inconsistent registrations.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/plugin_host/kernel_services.hpp"
#include "host/backend/cuda/kernel_registry.hpp"
#include "tests/support/build_plugins.hpp"

namespace {

using memra::backend::cuda::DeviceMatmul;
using memra::backend::cuda::KernelEntry;
using memra::backend::cuda::KernelRegistry;

// Kernel services that "load" a module by handing out a distinct token per name.
class FakeServices final : public memra::plugins::KernelServices {
 public:
  memra_status module_load(const std::string&, const char* name, memra_kernel_module** out, std::string*) override {
    auto& slot = modules_[name];
    if (!slot) slot = std::make_unique<int>(static_cast<int>(modules_.size()));
    *out = reinterpret_cast<memra_kernel_module*>(slot.get());
    return MEMRA_OK;
  }
  memra_status module_compile(const memra_nvrtc_request*, memra_kernel_module**, std::string* e) override { return fail(e); }
  memra_status kernel_get(memra_kernel_module*, const char*, memra_kernel**, std::string* e) override { return fail(e); }
  memra_status kernel_launch(memra_kernel*, const memra_launch_config*, void**, std::string* e) override { return fail(e); }
  // The name a module token stands for ("" if none).
  std::string name_of(const void* module) const {
    for (const auto& [n, p] : modules_)
      if (p.get() == module) return n;
    return "";
  }

 private:
  static memra_status fail(std::string* e) {
    *e = "not in this test";
    return MEMRA_ERR_UNSUPPORTED;
  }
  std::map<std::string, std::unique_ptr<int>> modules_;
};

memra_device_info cuda_device(const char* arch) {
  memra_device_info d{};
  d.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  d.backend = MEMRA_BACKEND_CUDA;
  d.arch = arch;
  return d;
}

// Every build quant plugin's register_kernels into a registry for `arch`.
void register_build_plugins(KernelRegistry& r, FakeServices& svc, const memra_device_info& device) {
  memra::plugins::ScopedKernelServices bound(&svc);
  auto& host = memra::testing::build_plugins();
  int plugins = 0;
  for (const memra::plugins::PluginInfo& info : host.plugins()) {
    if (info.kind != memra::plugins::PluginKind::quant) continue;
    auto q = host.quant(info.name);
    ASSERT_TRUE(q) << info.name;
    ASSERT_TRUE(MEMRA_STRUCT_HAS(&q->api(), memra_quant_api, register_kernels) && q->api().register_kernels) << info.name;
    KernelRegistry::PluginRegistrar reg;
    r.make_registrar(reg, &device, info.name, q->ctx(), &svc);
    ASSERT_EQ(q->api().register_kernels(q->ctx(), &reg.registrar), MEMRA_OK) << info.name << ": " << reg.last_error;
    ASSERT_TRUE(reg.last_error.empty()) << reg.last_error;
    ASSERT_TRUE(reg.commit().ok());
    ++plugins;
  }
  EXPECT_GE(plugins, 8);
}

TEST(KernelRegistry, SchemePluginsRegisterTheirKernelsOnBothArchs) {
  for (const char* arch : {"sm_90a", "sm_120a"}) {
    KernelRegistry r(arch);
    FakeServices svc;
    const memra_device_info device = cuda_device(arch);
    register_build_plugins(r, svc, device);
    // Integer schemes: rows of whole 256-element runs take the int8x32 GEMV module,
    // other rows the f32-row GEMV module; both carry the scheme's dequantiser and gather.
    for (const std::string scheme : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "iq4_xs"}) {
      const KernelEntry* e = r.find("matmul", scheme, int64_t{4096});
      ASSERT_NE(e, nullptr) << scheme << " on " << arch;
      ASSERT_TRUE(e->device.has_value());
      EXPECT_EQ(e->key.activation, MEMRA_ACT_INT8X32);
      EXPECT_EQ(e->key.arch, arch);
      EXPECT_EQ(e->device->form, MEMRA_GEMV_INT8);
      EXPECT_EQ(svc.name_of(e->device->module), "matmul8_" + scheme);
      EXPECT_EQ(e->device->gemm, MEMRA_GEMM_BF16);
      EXPECT_EQ(e->device->gemm_dequant, "memra_gemm_dequant_" + scheme);
      EXPECT_EQ(e->device->embedding, "memra_embedding_" + scheme);
      for (const DeviceMatmul::Launch& l : e->device->launch) EXPECT_EQ(l.kernel.rfind("memra_gemv8_", 0), 0u) << l.kernel;
      if (e->device->block_elems == 32) {  // 4224 = 132 blocks: not whole 256-element runs
        const KernelEntry* f = r.find("matmul", scheme, int64_t{4224});
        ASSERT_NE(f, nullptr);
        EXPECT_EQ(f->key.activation, MEMRA_ACT_F32);
        EXPECT_EQ(svc.name_of(f->device->module), "matmul_" + scheme);
      }
    }
    // bf16: the tensor-core GEMV for rows of 8-multiples, the _u1 row GEMV otherwise.
    const KernelEntry* b = r.find("matmul", "bf16", int64_t{4096});
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->device->form, MEMRA_GEMV_MMA16);
    EXPECT_EQ(b->device->gemm, MEMRA_GEMM_STREAMS_BF16);
    const KernelEntry* b1 = r.find("matmul", "bf16", int64_t{1001});
    ASSERT_NE(b1, nullptr);
    EXPECT_EQ(b1->device->form, MEMRA_GEMV_ROWS);
    EXPECT_EQ(b1->key.activation, MEMRA_ACT_BF16);
    // fp8: prepared bf16s128 rows; f32 and f16: f32 rows and the split prompt GEMM.
    const KernelEntry* p = r.find("matmul", "fp8", int64_t{4096});
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->key.activation, MEMRA_ACT_BF16S128);
    EXPECT_EQ(r.find("matmul", "fp8", int64_t{4000}), nullptr);  // breaks the 128-column groups
    for (const char* s : {"f32", "f16"}) {
      const KernelEntry* e = r.find("matmul", s, int64_t{1001});
      ASSERT_NE(e, nullptr) << s;
      EXPECT_EQ(e->key.activation, MEMRA_ACT_F32);
      EXPECT_EQ(e->device->gemm, MEMRA_GEMM_SPLIT);
      EXPECT_TRUE(e->device->by_alignment);
    }
    // CPU-only schemes register nothing.
    for (const char* s : {"q4_1", "q2_k", "iq4_nl"}) EXPECT_EQ(r.find("matmul", s, int64_t{4096}), nullptr) << s;
  }
}

TEST(KernelRegistry, SchemeInfoStatesPromptNumerics) {
  auto& host = memra::testing::build_plugins();
  const std::map<std::string, int32_t> want = {{"f32", MEMRA_PROMPT_EXACT},   {"bf16", MEMRA_PROMPT_BF16},
                                               {"q8_0", MEMRA_PROMPT_ROUNDED_WEIGHTS}, {"q4_k", MEMRA_PROMPT_ROUNDED_WEIGHTS},
                                               {"fp8", MEMRA_PROMPT_ROUNDED_WEIGHTS},  {"q2_k", MEMRA_PROMPT_EXACT}};
  int seen = 0;
  for (const memra::plugins::PluginInfo& info : host.plugins()) {
    if (info.kind != memra::plugins::PluginKind::quant) continue;
    auto q = host.quant(info.name);
    ASSERT_TRUE(q);
    for (const std::string& s : info.handles) {
      memra_scheme_info si{};
      si.struct_size = MEMRA_SCHEME_INFO_STRUCT_SIZE;
      ASSERT_EQ(q->api().scheme_info(q->ctx(), s.c_str(), &si), MEMRA_OK) << s;
      uint64_t bytes = 0;
      ASSERT_EQ(q->api().weight_bytes(q->ctx(), s.c_str(), 1, si.block_elems * 16, &bytes), MEMRA_OK) << s;
      EXPECT_EQ(bytes, static_cast<uint64_t>(si.block_bytes * 16)) << s << ": scheme_info's block agrees with weight_bytes";
      if (auto it = want.find(s); it != want.end()) {
        EXPECT_EQ(si.prompt, it->second) << s;
        ++seen;
      }
    }
  }
  EXPECT_EQ(seen, static_cast<int>(want.size()));
}

memra_status dummy_matmul(memra_plugin_ctx*, const memra_matmul_args*) { return MEMRA_OK; }

memra_kernel_desc plugin_desc(const char* scheme, const char* activation) {
  memra_kernel_desc d{};
  d.struct_size = MEMRA_KERNEL_DESC_STRUCT_SIZE;
  d.op = "matmul";
  d.scheme = scheme;
  d.activation = activation;
  d.arch = "sm_90a";
  d.score = 200;
  d.matmul = dummy_matmul;
  return d;
}

TEST(KernelRegistry, APluginsOwnMatmulTakesF32ActivationsOnly) {
  KernelRegistry r("sm_90a");
  FakeServices svc;
  const memra_device_info device = cuda_device("sm_90a");
  register_build_plugins(r, svc, device);
  KernelRegistry::PluginRegistrar reg;
  r.make_registrar(reg, &device, "test-plugin", nullptr, &svc);
  memra_kernel_desc d = plugin_desc("q8_0", "int8x32");  // known, but a plugin's own matmul gets f32 rows
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_ERR_UNSUPPORTED);
  EXPECT_NE(reg.last_error.find("f32 activations"), std::string::npos) << reg.last_error;
  reg.last_error.clear();
  d.activation = "q8_1";  // unknown
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(reg.last_error.find("bf16s128"), std::string::npos) << reg.last_error;
  d.activation = "f32";
  EXPECT_EQ(reg.registrar.add(reg.registrar.registry, &d), MEMRA_OK);
  ASSERT_TRUE(reg.commit().ok());
  // Its score outbids the scheme plugin's kernels for every row length.
  for (int64_t cols : {4096, 800}) {
    const KernelEntry* e = r.find("matmul", "q8_0", cols);
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(e->plugin.has_value()) << cols;
  }
}

// A device registration for sm_90a with the given form and activation, module from svc.
struct DeviceDesc {
  memra_matmul_kernels k{};
  memra_kernel_desc d{};
  DeviceDesc(memra_kernel_module* module, int form, const char* activation) {
    k.struct_size = MEMRA_MATMUL_KERNELS_STRUCT_SIZE;
    k.module = module;
    k.block_elems = 32, k.block_bytes = 34, k.gemv_form = form, k.gemv = "memra_gemv_x", k.mma_warps = 8;
    for (memra_gemv_launch& l : k.launch) l = {"memra_gemv8_x", 4, 0, 128};
    k.cols_multiple = 256;
    d = plugin_desc("x8", activation);
    d.matmul = nullptr;
    d.kernels = &k;
  }
};

TEST(KernelRegistry, DeviceRegistrationsAreChecked) {
  KernelRegistry r("sm_90a");
  FakeServices svc, other;
  const memra_device_info device = cuda_device("sm_90a");
  memra::plugins::KernelModuleHandle mine{&svc, nullptr}, foreign{&other, nullptr};
  memra_kernel_module* raw = nullptr;
  svc.module_load("", "m", &raw, nullptr);
  mine.module = raw;
  foreign.module = raw;
  auto* mod = reinterpret_cast<memra_kernel_module*>(&mine);
  auto try_add = [&](DeviceDesc& dd) {
    KernelRegistry::PluginRegistrar reg;
    r.make_registrar(reg, &device, "test-plugin", nullptr, &svc);
    const memra_status st = reg.registrar.add(reg.registrar.registry, &dd.d);
    if (st == MEMRA_OK) EXPECT_TRUE(reg.commit().ok());
    return std::make_pair(st, reg.last_error);
  };
  {
    DeviceDesc ok(mod, MEMRA_GEMV_INT8, MEMRA_ACT_INT8X32);
    EXPECT_EQ(try_add(ok).first, MEMRA_OK);
    const KernelEntry* e = r.find("matmul", "x8", int64_t{512});
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->device->module, raw);  // the backend's own handle, unwrapped
    EXPECT_EQ(r.find("matmul", "x8", int64_t{480}), nullptr);  // not a multiple of cols_multiple
  }
  struct Case {
    const char* why;
    std::function<void(DeviceDesc&)> change;
    const char* message;
  };
  const Case cases[] = {
      {"an INT8 form on f32 rows", [](DeviceDesc& d) { d.d.activation = MEMRA_ACT_F32; }, "int8x32"},
      {"a ROWS form on int8 rows", [](DeviceDesc& d) { d.k.gemv_form = MEMRA_GEMV_ROWS; }, "ROWS"},
      {"an unknown form", [](DeviceDesc& d) { d.k.gemv_form = 7; }, "unknown GEMV form"},
      {"no module", [](DeviceDesc& d) { d.k.module = nullptr; }, "no kernel module"},
      {"a module of another device", [&](DeviceDesc& d) { d.k.module = reinterpret_cast<memra_kernel_module*>(&foreign); },
       "not loaded on this device"},
      {"both a matmul and kernels", [](DeviceDesc& d) { d.d.matmul = dummy_matmul; }, "both"},
      {"rows that break the block", [](DeviceDesc& d) { d.k.cols_multiple = 48; }, "cols_multiple"},
      {"a tile without a launch", [](DeviceDesc& d) { d.k.launch[3].kernel = nullptr; }, "token tile"},
      {"a GEMM without its dequantiser", [](DeviceDesc& d) { d.k.gemm = MEMRA_GEMM_BF16; }, "dequantiser"},
      {"another arch", [](DeviceDesc& d) { d.d.arch = "sm_120a"; }, "cannot run"},
  };
  for (const Case& c : cases) {
    DeviceDesc dd(mod, MEMRA_GEMV_INT8, MEMRA_ACT_INT8X32);
    c.change(dd);
    const auto [st, why] = try_add(dd);
    EXPECT_NE(st, MEMRA_OK) << c.why;
    EXPECT_NE(why.find(c.message), std::string::npos) << c.why << ": " << why;
  }
}

}  // namespace
