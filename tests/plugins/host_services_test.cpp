// The memra_host_api callbacks, called as a plugin would call them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/plugin_host/host_services.hpp"
#include "core/plugin_host/kernel_services.hpp"
#include "tests/plugins/test_support.hpp"

namespace memra::plugins {
namespace {

using test::LogCapture;

std::shared_ptr<const HostEnvironment> make_env(const LogCapture& log, ConfigLookup config = {}) {
  HostServicesOptions o;
  o.log = log.sink();
  o.config = std::move(config);
  return std::make_shared<const HostEnvironment>(std::move(o));
}

TEST(PluginsServices, TableIsCurrentWithKernelSlotsThatNeedABackend) {
  LogCapture log;
  HostServices s("p", make_env(log));
  const memra_host_api* api = s.api();
  EXPECT_EQ(api->struct_size, MEMRA_HOST_API_STRUCT_SIZE);
  EXPECT_EQ(api->abi_major, uint32_t(MEMRA_ABI_MAJOR));
  EXPECT_EQ(api->abi_minor, uint32_t(MEMRA_ABI_MINOR));
  EXPECT_NE(api->ctx, nullptr);
  EXPECT_NE(api->log, nullptr);
  EXPECT_NE(api->error_report, nullptr);
  EXPECT_NE(api->config_get, nullptr);
  EXPECT_NE(api->device_info_get, nullptr);
  EXPECT_NE(api->memory_alloc, nullptr);
  EXPECT_NE(api->memory_free, nullptr);
  ASSERT_NE(api->kernel_module_load, nullptr);
  ASSERT_NE(api->kernel_module_compile, nullptr);
  ASSERT_NE(api->kernel_get, nullptr);
  ASSERT_NE(api->kernel_launch, nullptr);
  // No GPU backend bound to this thread: refused, and the plugin learns why.
  memra_kernel_module* m = nullptr;
  EXPECT_EQ(api->kernel_module_load(api->ctx, "mine", &m), MEMRA_ERR_UNSUPPORTED);
  EXPECT_EQ(m, nullptr);
  EXPECT_THAT(s.last_error(), ::testing::HasSubstr("no GPU backend is registering kernels on this thread"));
}

// Records what the host's kernel slots asked of it.
struct FakeKernelServices : memra::plugins::KernelServices {
  std::string dir, name;
  int launches = 0;
  uint32_t last_num_args = 0;
  memra_status module_load(const std::string& plugin_dir, const char* n, memra_kernel_module** out, std::string*) override {
    dir = plugin_dir;
    name = n;
    *out = reinterpret_cast<memra_kernel_module*>(this);
    return MEMRA_OK;
  }
  memra_status module_compile(const memra_nvrtc_request*, memra_kernel_module**, std::string* e) override {
    *e = "no NVRTC here";
    return MEMRA_ERR_UNSUPPORTED;
  }
  memra_status kernel_get(memra_kernel_module* m, const char* n, memra_kernel** out, std::string* e) override {
    if (m != reinterpret_cast<memra_kernel_module*>(this)) {
      *e = "foreign module";
      return MEMRA_ERR_INVALID_ARGUMENT;
    }
    if (std::string(n) != "k") {
      *e = std::string("no kernel ") + n;
      return MEMRA_ERR_NOT_FOUND;
    }
    *out = reinterpret_cast<memra_kernel*>(&launches);
    return MEMRA_OK;
  }
  memra_status kernel_launch(memra_kernel* k, const memra_launch_config* c, void**, std::string*) override {
    if (k != reinterpret_cast<memra_kernel*>(&launches)) return MEMRA_ERR_INVALID_ARGUMENT;
    ++launches;
    last_num_args = c->num_args;
    return MEMRA_OK;
  }
};

TEST(PluginsServices, KernelSlotsActOnTheBackendThatLoadedTheModule) {
  LogCapture log;
  HostServices s("ex", make_env(log), "/plugins/ex");
  const memra_host_api* api = s.api();
  FakeKernelServices gpu;
  memra_kernel_module* m = nullptr;
  memra_kernel* k = nullptr;
  {
    memra::plugins::ScopedKernelServices bound(&gpu);
    ASSERT_EQ(api->kernel_module_load(api->ctx, "ex_mod", &m), MEMRA_OK);
    EXPECT_EQ(gpu.dir, "/plugins/ex");  // the plugin's own directory is searched first
    EXPECT_EQ(gpu.name, "ex_mod");
    EXPECT_EQ(api->kernel_get(api->ctx, m, "nope", &k), MEMRA_ERR_NOT_FOUND);
    EXPECT_EQ(s.last_error(), "kernel_get(nope): no kernel nope");
    ASSERT_EQ(api->kernel_get(api->ctx, m, "k", &k), MEMRA_OK);
    memra_nvrtc_request r{MEMRA_NVRTC_REQUEST_STRUCT_SIZE, "x", "src", nullptr, 0};
    memra_kernel_module* c = nullptr;
    EXPECT_EQ(api->kernel_module_compile(api->ctx, &r, &c), MEMRA_ERR_UNSUPPORTED);
    EXPECT_EQ(s.last_error(), "kernel_module_compile: no NVRTC here");
  }
  // Later launches (inside a matmul) go to the kernel's backend with no binding.
  memra_launch_config cfg{};
  cfg.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  const size_t sizes[] = {8, 4};
  cfg.num_args = 2;
  cfg.arg_sizes = sizes;
  ASSERT_EQ(api->kernel_launch(api->ctx, k, &cfg, nullptr), MEMRA_OK);
  EXPECT_EQ(gpu.launches, 1);
  EXPECT_EQ(gpu.last_num_args, 2u);
}

TEST(PluginsServices, LogLinesArePrefixedWithThePluginName) {
  LogCapture log;
  HostServices s("q4_k", make_env(log));
  s.api()->log(s.api()->ctx, MEMRA_LOG_WARN, "loaded 3 kernels");
  s.api()->log(s.api()->ctx, MEMRA_LOG_INFO, nullptr);
  EXPECT_THAT(log.lines(), ::testing::ElementsAre("[q4_k] loaded 3 kernels", "[q4_k] (null message)"));
}

TEST(PluginsServices, ConfigGetCopiesReportsSizeAndRefusesSmallBuffers) {
  LogCapture log;
  HostServices s("p", make_env(log, [](std::string_view key) -> std::optional<std::string> {
                   if (key == "model.dtype") return std::string("bfloat16");
                   if (key == "empty") return std::string();
                   return std::nullopt;
                 }));
  const memra_host_api* api = s.api();
  char buf[32];
  size_t needed = 0;
  ASSERT_EQ(api->config_get(api->ctx, "model.dtype", buf, sizeof buf, &needed), MEMRA_OK);
  EXPECT_STREQ(buf, "bfloat16");
  EXPECT_EQ(needed, 9u);

  // Exactly big enough.
  char exact[9];
  ASSERT_EQ(api->config_get(api->ctx, "model.dtype", exact, sizeof exact, &needed), MEMRA_OK);
  EXPECT_STREQ(exact, "bfloat16");

  // Too small: INVALID_ARGUMENT, *needed still set, buffer NUL-terminated.
  char small[4];
  needed = 0;
  EXPECT_EQ(api->config_get(api->ctx, "model.dtype", small, sizeof small, &needed), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(needed, 9u);
  EXPECT_EQ(std::strlen(small), 3u);

  // Size probe with no buffer.
  needed = 0;
  EXPECT_EQ(api->config_get(api->ctx, "model.dtype", nullptr, 0, &needed), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(needed, 9u);

  ASSERT_EQ(api->config_get(api->ctx, "empty", buf, sizeof buf, &needed), MEMRA_OK);
  EXPECT_EQ(needed, 1u);
  EXPECT_STREQ(buf, "");

  EXPECT_EQ(api->config_get(api->ctx, "absent", buf, sizeof buf, &needed), MEMRA_ERR_NOT_FOUND);
  EXPECT_EQ(needed, 0u);
  EXPECT_EQ(api->config_get(api->ctx, nullptr, buf, sizeof buf, &needed), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api->config_get(api->ctx, "model.dtype", buf, sizeof buf, nullptr), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api->config_get(api->ctx, "model.dtype", nullptr, 8, &needed), MEMRA_ERR_INVALID_ARGUMENT);
}

TEST(PluginsServices, ConfigGetWithoutLookupFindsNothing) {
  LogCapture log;
  HostServices s("p", make_env(log));
  char buf[8];
  size_t needed = 99;
  EXPECT_EQ(s.api()->config_get(s.api()->ctx, "x", buf, sizeof buf, &needed), MEMRA_ERR_NOT_FOUND);
  EXPECT_EQ(needed, 0u);
}

TEST(PluginsServices, NoExceptionCrossesTheBoundary) {
  HostServicesOptions o;
  o.log = [](memra_log_level, std::string_view) { throw std::runtime_error("sink broke"); };
  o.config = [](std::string_view) -> std::optional<std::string> { throw std::runtime_error("lookup broke"); };
  HostServices s("p", std::make_shared<const HostEnvironment>(std::move(o)));
  const memra_host_api* api = s.api();
  char buf[8];
  size_t needed = 0;
  EXPECT_EQ(api->config_get(api->ctx, "x", buf, sizeof buf, &needed), MEMRA_ERR_INTERNAL);
  EXPECT_NO_THROW(api->log(api->ctx, MEMRA_LOG_ERROR, "still fine"));
  EXPECT_EQ(api->error_report(api->ctx, MEMRA_ERR_IO, "disk gone"), MEMRA_ERR_IO);
  EXPECT_EQ(s.last_error(), "disk gone");
}

TEST(PluginsServices, DeviceInfoDefaultsToTheCpuReference) {
  LogCapture log;
  HostServices s("p", make_env(log));
  const memra_host_api* api = s.api();
  memra_device_info info{};
  info.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(api->device_info_get(api->ctx, &info), MEMRA_OK);
  EXPECT_EQ(info.backend, MEMRA_BACKEND_CPU);
  EXPECT_STREQ(info.arch, "cpu");
  EXPECT_STREQ(info.name, "CPU reference");
  EXPECT_EQ(info.compute_major, 0);
  EXPECT_GE(info.multiprocessor_count, 1);
  EXPECT_GT(info.total_memory_bytes, 0u);

  // A caller built against a newer minor passes a bigger struct: the host fills what
  // it knows and says so through struct_size.
  struct Bigger {
    memra_device_info v1;
    uint64_t future_field;
  } bigger{};
  bigger.v1.struct_size = sizeof bigger;
  bigger.future_field = 42;
  ASSERT_EQ(api->device_info_get(api->ctx, &bigger.v1), MEMRA_OK);
  EXPECT_EQ(bigger.v1.struct_size, MEMRA_DEVICE_INFO_STRUCT_SIZE);
  EXPECT_EQ(bigger.future_field, 42u);

  memra_device_info too_small{};
  too_small.struct_size = 16;
  EXPECT_EQ(api->device_info_get(api->ctx, &too_small), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api->device_info_get(api->ctx, nullptr), MEMRA_ERR_INVALID_ARGUMENT);
}

TEST(PluginsServices, DeviceInfoReportsAConfiguredDevice) {
  LogCapture log;
  HostServicesOptions o;
  o.log = log.sink();
  DeviceDescription d;
  d.backend = MEMRA_BACKEND_CUDA;
  d.compute_major = 12;
  d.arch = "sm_120a";
  d.name = "test board";
  o.device = d;
  HostServices s("p", std::make_shared<const HostEnvironment>(std::move(o)));
  memra_device_info info{};
  info.struct_size = MEMRA_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(s.api()->device_info_get(s.api()->ctx, &info), MEMRA_OK);
  EXPECT_EQ(info.backend, MEMRA_BACKEND_CUDA);
  EXPECT_EQ(info.compute_major, 12);
  EXPECT_STREQ(info.arch, "sm_120a");
}

TEST(PluginsServices, HostMemoryIsAlignedTrackedAndFreed) {
  LogCapture log;
  HostServices s("p", make_env(log));
  const memra_host_api* api = s.api();
  for (uint64_t alignment : {0u, 8u, 64u, 256u, 4096u}) {
    memra_buffer b{};
    b.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
    ASSERT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, 1000, alignment, &b), MEMRA_OK) << alignment;
    ASSERT_NE(b.ptr, nullptr);
    EXPECT_EQ(b.bytes, 1000u);
    EXPECT_EQ(b.location, MEMRA_MEMORY_HOST);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.ptr) % (alignment == 0 ? 64 : alignment), 0u) << alignment;
    std::memset(b.ptr, 0xab, 1000);  // the whole range is writable (ASan/valgrind would catch less)
    EXPECT_EQ(s.live_allocations(), 1u);
    api->memory_free(api->ctx, &b);
    EXPECT_EQ(b.ptr, nullptr);
    EXPECT_EQ(s.live_allocations(), 0u);
  }

  memra_buffer zero{};
  zero.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
  ASSERT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, 0, 0, &zero), MEMRA_OK);
  EXPECT_NE(zero.ptr, nullptr);
  memra_buffer copy = zero;
  api->memory_free(api->ctx, &zero);
  api->memory_free(api->ctx, &copy);  // double free: logged and ignored, no crash
  EXPECT_EQ(log.containing("[p] memory_free: the buffer was not allocated").size(), 1u);
}

TEST(PluginsServices, HostMemoryRejectsBadRequests) {
  LogCapture log;
  HostServices s("p", make_env(log));
  const memra_host_api* api = s.api();
  memra_buffer b{};
  b.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_DEVICE, 64, 0, &b), MEMRA_ERR_UNSUPPORTED);
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST_PINNED, 64, 0, &b), MEMRA_ERR_UNSUPPORTED);
  EXPECT_EQ(api->memory_alloc(api->ctx, 77, 64, 0, &b), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, 64, 3, &b), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, UINT64_MAX, 0, &b), MEMRA_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, 64, 0, nullptr), MEMRA_ERR_INVALID_ARGUMENT);
  memra_buffer small{};
  small.struct_size = 8;
  EXPECT_EQ(api->memory_alloc(api->ctx, MEMRA_MEMORY_HOST, 64, 0, &small), MEMRA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(b.ptr, nullptr);
  EXPECT_EQ(s.live_allocations(), 0u);
}

TEST(PluginsServices, BuffersLeftBehindAreFreedAndReportedAtUnload) {
  LogCapture log;
  {
    HostServices s("leaky", make_env(log));
    memra_buffer b{};
    b.struct_size = MEMRA_BUFFER_STRUCT_SIZE;
    ASSERT_EQ(s.api()->memory_alloc(s.api()->ctx, MEMRA_MEMORY_HOST, 100, 0, &b), MEMRA_OK);
  }
  EXPECT_EQ(log.containing("[leaky] 1 host buffer(s), 100 bytes, were never passed to memory_free").size(), 1u);
}

TEST(PluginsServices, LastErrorIsPerThreadAndPerPlugin) {
  LogCapture log;
  auto env = make_env(log);
  HostServices a("a", env), b("b", env);
  EXPECT_EQ(a.api()->error_report(a.api()->ctx, MEMRA_ERR_NOT_FOUND, "a on main"), MEMRA_ERR_NOT_FOUND);
  b.api()->error_report(b.api()->ctx, MEMRA_ERR_IO, "b on main");
  std::string seen_in_thread_before, seen_in_thread_after;
  std::thread t([&] {
    seen_in_thread_before = a.last_error();
    a.api()->error_report(a.api()->ctx, MEMRA_ERR_IO, "a on worker");
    seen_in_thread_after = a.last_error();
  });
  t.join();
  EXPECT_EQ(seen_in_thread_before, "");
  EXPECT_EQ(seen_in_thread_after, "a on worker");
  EXPECT_EQ(a.last_error(), "a on main");
  EXPECT_EQ(b.last_error(), "b on main");
  a.clear_last_error();
  EXPECT_EQ(a.last_error(), "");
  EXPECT_EQ(b.last_error(), "b on main");
}

}  // namespace
}  // namespace memra::plugins
