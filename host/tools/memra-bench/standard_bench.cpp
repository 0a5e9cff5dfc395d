#include "host/tools/memra-bench/standard_bench.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "core/plugin_host/kernel_services.hpp"
#include "host/backend/backend.hpp"

namespace memra::bench {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Device memory in use on device 0 (all of it: every context and process), from the
// driver; 0 when there is no driver. Sampled after each phase for the peak.
uint64_t device_memory_used() {
  using InitFn = int (*)(unsigned);
  using DeviceGetFn = int (*)(int*, int);
  using RetainFn = int (*)(void**, int);
  using CtxFn = int (*)(void*);
  using PopFn = int (*)(void**);
  using MemInfoFn = int (*)(size_t*, size_t*);
  using ReleaseFn = int (*)(int);
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto device_get = reinterpret_cast<DeviceGetFn>(dlsym(lib, "cuDeviceGet"));
  auto retain = reinterpret_cast<RetainFn>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
  auto push = reinterpret_cast<CtxFn>(dlsym(lib, "cuCtxPushCurrent_v2"));
  auto pop = reinterpret_cast<PopFn>(dlsym(lib, "cuCtxPopCurrent_v2"));
  auto mem_info = reinterpret_cast<MemInfoFn>(dlsym(lib, "cuMemGetInfo_v2"));
  auto release = reinterpret_cast<ReleaseFn>(dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
  if (!init || !device_get || !retain || !push || !pop || !mem_info || !release || init(0) != 0) return 0;
  int dev = 0;
  void* ctx = nullptr;
  if (device_get(&dev, 0) != 0 || retain(&ctx, dev) != 0) return 0;
  size_t free_b = 0, total_b = 0;
  uint64_t used = 0;
  if (push(ctx) == 0) {
    if (mem_info(&free_b, &total_b) == 0) used = total_b - free_b;
    void* popped = nullptr;
    pop(&popped);
  }
  release(dev);
  return used;
}

// Device-to-device copy bandwidth (bytes read + bytes written per second) of a
// 1 GiB buffer, through a copy kernel compiled with NVRTC on a separate backend
// instance (same primary context). Median of 10 copies after 2 warm-ups.
Result<double> measure_copy_gbps() {
  backend::BackendOptions bo;
  bo.kind = MEMRA_BACKEND_CUDA;
  auto opened = backend::open_backend(bo);
  if (!opened) return opened.error();
  backend::Backend& b = **opened;
  plugins::KernelServices* k_services = b.kernel_services();
  if (!k_services) return make_error(ErrorCode::unsupported, "copy benchmark: " + b.name() + " has no kernel services");
  const uint64_t bytes = 1ull << 30;
  auto src = b.memory_alloc(MEMRA_MEMORY_DEVICE, bytes);
  if (!src) return src.error();
  auto dst = b.memory_alloc(MEMRA_MEMORY_DEVICE, bytes);
  if (!dst) {
    b.memory_free(*src);
    return dst.error();
  }
  struct Free {
    backend::Backend& b;
    memra_buffer& s;
    memra_buffer& d;
    ~Free() {
      b.memory_free(s);
      b.memory_free(d);
    }
  } release{b, *src, *dst};
  static const char* kSource =
      "extern \"C\" __global__ void memra_bench_copy(const float4* s, float4* d, unsigned long long n) {\n"
      "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;\n"
      "       i += (unsigned long long)gridDim.x * blockDim.x) d[i] = s[i];\n"
      "}\n";
  memra_nvrtc_request req{MEMRA_NVRTC_REQUEST_STRUCT_SIZE, "memra_bench_copy", kSource, nullptr, 0};
  memra_kernel_module* mod = nullptr;
  memra_kernel* k = nullptr;
  std::string why;
  if (k_services->module_compile(&req, &mod, &why) != MEMRA_OK || k_services->kernel_get(mod, "memra_bench_copy", &k, &why) != MEMRA_OK)
    return make_error(ErrorCode::internal, "copy benchmark: " + why);
  const memra_device_info info = b.device_info();
  unsigned long long n = bytes / 16;
  void* sp = src->ptr;
  void* dp = dst->ptr;
  void* args[] = {&sp, &dp, &n};
  memra_launch_config lc{};
  lc.struct_size = MEMRA_LAUNCH_CONFIG_STRUCT_SIZE;
  lc.grid[0] = static_cast<uint32_t>(std::max(1, info.multiprocessor_count) * 8);
  lc.grid[1] = lc.grid[2] = 1;
  lc.block[0] = 512;
  lc.block[1] = lc.block[2] = 1;
  std::vector<double> times;
  for (int i = 0; i < 12; ++i) {
    if (auto st = b.synchronize(); !st) return make_error(ErrorCode::internal, "copy benchmark: " + st.error().message);
    const double t0 = now_s();
    if (k_services->kernel_launch(k, &lc, args, &why) != MEMRA_OK) return make_error(ErrorCode::internal, "copy benchmark: " + why);
    if (auto st = b.synchronize(); !st) return make_error(ErrorCode::internal, "copy benchmark: " + st.error().message);
    if (i >= 2) times.push_back(now_s() - t0);
  }
  return 2.0 * static_cast<double>(bytes) / median(times) / 1e9;
}

}  // namespace

WeightBytes weight_bytes(const engine::ModelSource& source) {
  WeightBytes b;
  for (const memra_weight& w : source.weights) {
    if (std::string(w.name) == "token_embd.weight") b.embedding = w.bytes;
    else if (w.ndim == 2) b.matrices += w.bytes;
  }
  b.tied = source.config.tie_word_embeddings;
  return b;
}

int64_t standard_bench_context(const StandardBenchOptions& o) {
  int max_depth = 0;
  for (int d : o.depths) max_depth = std::max(max_depth, d);
  return std::max<int64_t>(o.prompt_tokens + 1, max_depth + o.gen_tokens + 1) + 16;
}

int run_standard_bench(engine::Engine& engine, const StandardBenchOptions& o, StandardFigures* figures) {
  using engine::StepRequest;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(engine.vocab_size() - 1));
  auto random_tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = tok(rng);
    return v;
  };
  uint64_t peak_used = o.cuda ? device_memory_used() : 0;
  auto sample_memory = [&] {
    if (o.cuda) peak_used = std::max(peak_used, device_memory_used());
  };

  double gbps = o.fallback_gbps;
  std::string gbps_source = "assumed (--hbm-gbps)";
  if (o.cuda) {
    auto g = measure_copy_gbps();
    if (g) {
      gbps = *g;
      gbps_source = "measured device-to-device copy";
    } else {
      std::fprintf(stderr, "memra-bench: could not measure the copy bandwidth (%s); using %.0f GB/s\n",
                   g.error().message.c_str(), gbps);
    }
  }
  if (!o.json) std::printf("copy bandwidth: %.0f GB/s (%s)\n", gbps, gbps_source.c_str());

  // Prefill of one prompt (pp) and time to first token: one step with every prompt token,
  // then the argmax of the last row. Medians of `repeats` runs after a warm-up.
  StandardFigures f;
  std::vector<double> pp_times, ttft_times;
  for (int run = 0; run <= o.repeats; ++run) {
    const std::vector<int32_t> prompt = random_tokens(o.prompt_tokens);
    const int32_t seq = engine.open_sequence();
    StepRequest r{seq, prompt, false, /*prompt=*/true};
    const double t0 = now_s();
    auto out = engine.step({&r, 1});
    const double t1 = now_s();
    if (!out) {
      std::fprintf(stderr, "memra-bench: prefill of %d tokens failed: %s\n", o.prompt_tokens, out.error().message.c_str());
      engine.close_sequence(seq);
      return 1;
    }
    const std::vector<float>& row = out->back();
    const auto best = std::max_element(row.begin(), row.end()) - row.begin();
    const double t2 = now_s();
    (void)best;
    engine.close_sequence(seq);
    sample_memory();
    if (run == 0) continue;  // warm-up
    pp_times.push_back(t1 - t0);
    ttft_times.push_back(t2 - t0);
  }
  f.pp_tok_s = o.prompt_tokens / median(pp_times);
  f.ttft_ms = 1e3 * median(ttft_times);

  // Decode (tg) at each depth: prefill `depth` tokens in chunks of 512, then time
  // `gen_tokens` one-token steps. KV bytes read per token: every layer's K and V rows
  // (backend::kv_row_bytes each: fp8 with its scale) up to the token's position, averaged over the timed steps.
  const double kv_row_bytes = static_cast<double>(engine.kv_bytes_per_token());
  for (int depth : o.depths) {
    std::vector<double> times;
    for (int run = 0; run <= o.repeats; ++run) {
      const int32_t seq = engine.open_sequence();
      const std::vector<int32_t> ctx = random_tokens(std::max(depth, 1));
      for (int at = 0; at < static_cast<int>(ctx.size()); at += 512) {
        const int n = std::min<int>(512, static_cast<int>(ctx.size()) - at);
        StepRequest r{seq, std::span<const int32_t>(ctx).subspan(static_cast<size_t>(at), static_cast<size_t>(n)), false,
                      /*prompt=*/true};
        if (auto out = engine.step({&r, 1}); !out) {
          std::fprintf(stderr, "memra-bench: prefill to depth %d failed: %s\n", depth, out.error().message.c_str());
          engine.close_sequence(seq);
          return 1;
        }
      }
      std::vector<int32_t> next = random_tokens(o.gen_tokens);
      const double t0 = now_s();
      for (int i = 0; i < o.gen_tokens; ++i) {
        StepRequest r{seq, {&next[static_cast<size_t>(i)], 1}, false, /*prompt=*/false};
        if (auto out = engine.step({&r, 1}); !out) {
          std::fprintf(stderr, "memra-bench: decode at depth %d failed: %s\n", depth, out.error().message.c_str());
          engine.close_sequence(seq);
          return 1;
        }
      }
      const double dt = now_s() - t0;
      engine.close_sequence(seq);
      sample_memory();
      if (run > 0) times.push_back(dt);
    }
    StandardFigures::Depth d;
    d.depth = depth;
    d.ms_per_token = 1e3 * median(times) / o.gen_tokens;
    d.tok_s = o.gen_tokens / median(times);
    const double avg_len = std::max(depth, 1) + 0.5 * (o.gen_tokens + 1);
    d.bytes_per_token = static_cast<double>(o.weight_bytes_per_token) + kv_row_bytes * avg_len;
    d.roofline = d.bytes_per_token * d.tok_s / (gbps * 1e9);
    f.tg.push_back(d);
  }

  f.copy_gbps = gbps;
  if (figures) *figures = f;
  if (o.json) {
    nlohmann::json j;
    j["model"] = o.model_label;
    j["quant"] = o.quant;
    j["copy_gbps"] = gbps;
    j["copy_gbps_source"] = gbps_source;
    j["repeats"] = o.repeats;
    j["pp"] = {{"prompt_tokens", o.prompt_tokens}, {"tok_s", f.pp_tok_s}, {"ttft_ms", f.ttft_ms}};
    j["tg"] = nlohmann::json::array();
    for (const auto& d : f.tg)
      j["tg"].push_back({{"depth", d.depth}, {"gen_tokens", o.gen_tokens}, {"tok_s", d.tok_s}, {"ms_per_token", d.ms_per_token},
                         {"bytes_per_token", d.bytes_per_token}, {"roofline_fraction", d.roofline}});
    j["peak_device_memory_bytes"] = peak_used;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("pp%d: %.1f tok/s   TTFT (%d-token prompt): %.2f ms   (medians of %d runs after a warm-up)\n",
                o.prompt_tokens, f.pp_tok_s, o.prompt_tokens, f.ttft_ms, o.repeats);
    for (const auto& d : f.tg)
      std::printf("tg%d @ depth %d: %.1f tok/s (%.3f ms/token), %.2f GB read per token, %.1f %% of roofline\n", o.gen_tokens,
                  d.depth, d.tok_s, d.ms_per_token, d.bytes_per_token / 1e9, 100.0 * d.roofline);
    if (o.cuda) std::printf("peak device memory in use (sampled): %.2f GiB\n", static_cast<double>(peak_used) / (1ull << 30));
  }
  return 0;
}

}  // namespace memra::bench
